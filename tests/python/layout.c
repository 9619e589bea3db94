/* Prints the size of every struct bindings/python/sbx/_lib.py mirrors and the offset of each
 * of its members, one per line: "TYPE SIZE" then "TYPE.MEMBER OFFSET". test_layout.py compares
 * them with the ctypes classes. */
#include <stddef.h>
#include <stdio.h>

#include <sbx/host.h>

#define SIZE(t)      printf("%s %zu\n", #t, sizeof(t))
#define AT(t, m)     printf("%s.%s %zu\n", #t, #m, offsetof(t, m))
#define HEADER_OF(t) (AT(t, struct_size), AT(t, abi_major), AT(t, abi_minor))

int main(void)
{
	SIZE(sbx_error);
	AT(sbx_error, code);
	AT(sbx_error, message);

	SIZE(sbx_kv);
	AT(sbx_kv, key);
	AT(sbx_kv, value);

	SIZE(sbx_host_options);
	HEADER_OF(sbx_host_options);
	AT(sbx_host_options, registry_path);
	AT(sbx_host_options, config_path);
	AT(sbx_host_options, config_text);
	AT(sbx_host_options, state_dir);
	AT(sbx_host_options, run_id);
	AT(sbx_host_options, ledger_retention);

	SIZE(sbx_create_opts);
	HEADER_OF(sbx_create_opts);
	AT(sbx_create_opts, data_source);
	AT(sbx_create_opts, image);
	AT(sbx_create_opts, labels);
	AT(sbx_create_opts, n_labels);
	AT(sbx_create_opts, reserved0);
	AT(sbx_create_opts, env);
	AT(sbx_create_opts, n_env);
	AT(sbx_create_opts, reserved1);
	AT(sbx_create_opts, ttl_seconds);
	AT(sbx_create_opts, detached);
	AT(sbx_create_opts, reserved2);
	AT(sbx_create_opts, owner_pid);
	AT(sbx_create_opts, wait_seconds);
	AT(sbx_create_opts, share_dir);

	SIZE(sbx_exec_opts);
	HEADER_OF(sbx_exec_opts);
	AT(sbx_exec_opts, shell);
	AT(sbx_exec_opts, argv);
	AT(sbx_exec_opts, cwd);
	AT(sbx_exec_opts, env);
	AT(sbx_exec_opts, n_env);
	AT(sbx_exec_opts, has_stdin);
	AT(sbx_exec_opts, stdin_data);
	AT(sbx_exec_opts, stdin_len);
	AT(sbx_exec_opts, timeout);
	AT(sbx_exec_opts, user);
	AT(sbx_exec_opts, background);
	AT(sbx_exec_opts, reserved0);
	AT(sbx_exec_opts, stdout_path);
	AT(sbx_exec_opts, stderr_path);

	SIZE(sbx_exec_result);
	HEADER_OF(sbx_exec_result);
	AT(sbx_exec_result, exit_code);
	AT(sbx_exec_result, signal);
	AT(sbx_exec_result, timed_out);
	AT(sbx_exec_result, truncated);
	AT(sbx_exec_result, duration);
	AT(sbx_exec_result, stdout_text);
	AT(sbx_exec_result, stderr_text);
	AT(sbx_exec_result, stdout_text_len);
	AT(sbx_exec_result, stderr_text_len);
	AT(sbx_exec_result, original_stdout_length);
	AT(sbx_exec_result, original_stderr_length);
	AT(sbx_exec_result, stdout_bytes);
	AT(sbx_exec_result, stderr_bytes);
	AT(sbx_exec_result, stdout_dropped);
	AT(sbx_exec_result, stderr_dropped);
	AT(sbx_exec_result, output_dir);
	AT(sbx_exec_result, stdout_file);
	AT(sbx_exec_result, stderr_file);
	AT(sbx_exec_result, oom_killed);
	AT(sbx_exec_result, reserved0);
	AT(sbx_exec_result, job_id);

	SIZE(sbx_job_info);
	HEADER_OF(sbx_job_info);
	AT(sbx_job_info, id);
	AT(sbx_job_info, sandbox_id);
	AT(sbx_job_info, state);
	AT(sbx_job_info, exit_code);
	AT(sbx_job_info, signal);
	AT(sbx_job_info, reserved0);
	AT(sbx_job_info, pid);
	AT(sbx_job_info, started);
	AT(sbx_job_info, duration);
	AT(sbx_job_info, stdout_bytes);
	AT(sbx_job_info, stderr_bytes);
	AT(sbx_job_info, command);

	SIZE(sbx_file_info);
	HEADER_OF(sbx_file_info);
	AT(sbx_file_info, kind);
	AT(sbx_file_info, mode);
	AT(sbx_file_info, size);
	AT(sbx_file_info, mtime);
	AT(sbx_file_info, name);

	SIZE(sbx_plugin_info);
	HEADER_OF(sbx_plugin_info);
	AT(sbx_plugin_info, alias);
	AT(sbx_plugin_info, path);
	AT(sbx_plugin_info, registry_file);
	AT(sbx_plugin_info, state);
	AT(sbx_plugin_info, plugin_abi_major);
	AT(sbx_plugin_info, plugin_abi_minor);
	AT(sbx_plugin_info, version);
	AT(sbx_plugin_info, description);
	AT(sbx_plugin_info, reason);

	SIZE(sbx_session_record);
	HEADER_OF(sbx_session_record);
	AT(sbx_session_record, user_id);
	AT(sbx_session_record, session_id);
	AT(sbx_session_record, sandbox_id);
	AT(sbx_session_record, data_source);
	AT(sbx_session_record, image);
	AT(sbx_session_record, state);
	AT(sbx_session_record, ttl_seconds);
	AT(sbx_session_record, created);
	AT(sbx_session_record, updated);
	AT(sbx_session_record, assets);
	AT(sbx_session_record, n_assets);
	AT(sbx_session_record, reserved0);

	SIZE(sbx_call);
	HEADER_OF(sbx_call);
	AT(sbx_call, op);
	AT(sbx_call, reserved0);
	AT(sbx_call, tag);
	AT(sbx_call, id);
	AT(sbx_call, create);
	AT(sbx_call, exec);
	AT(sbx_call, path);
	AT(sbx_call, data);
	AT(sbx_call, len);
	AT(sbx_call, mode);
	AT(sbx_call, reserved1);

	SIZE(sbx_completion);
	HEADER_OF(sbx_completion);
	AT(sbx_completion, op);
	AT(sbx_completion, status);
	AT(sbx_completion, tag);
	AT(sbx_completion, err);
	AT(sbx_completion, id);
	AT(sbx_completion, exec);
	AT(sbx_completion, data);
	AT(sbx_completion, len);
	printf("SBX_ABI %d.%d\n", SBX_ABI_MAJOR, SBX_ABI_MINOR);
	return 0;
}
