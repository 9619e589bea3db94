/* Linked into every executable of a sanitized build (SBX_SANITIZE; docs/design.md "Sanitized
 * builds").
 *
 * GCC 12's LeakSanitizer takes a dynamic TLS block that starts 16 bytes past a page for one
 * laid out by glibc 2.19 and reads the 16 bytes before it as that block's size and start.
 * Since glibc 2.25 the block comes from malloc, so those bytes are ASan's own chunk header,
 * and the leak check at exit scans from address 0x165 and crashes ("Tracer caught signal
 * 11"), turning the process's exit status into 1. Any sbx process meets this by address luck:
 * libgnutls (loaded with libcurl by the plugins) first touches its thread-local data in its
 * destructor. Not intercepting __tls_get_addr skips that bookkeeping only; the blocks are
 * ordinary heap chunks, reachable from the thread's DTV, so the leak check still sees them. */
const char *__asan_default_options(void);

__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
	return "intercept_tls_get_addr=0";
}
