/* A module with thread-local data: loaded by dlopen, its block is dynamic TLS. */
long *tlsmod_address(void);

static _Thread_local long value;

__attribute__((visibility("default"))) long *tlsmod_address(void)
{
	return &value;
}
