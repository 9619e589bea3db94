/* Image archives for the isolated level (see ns.c): not imported yet. */
#include "local.h"

int sbx__local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
			    sbx_error *err)
{
	(void)st;
	(void)cap;
	buf[0] = '\0';
	return sbx__local_host->set_error(
	    err, SBX_E_UNSUPPORTED, "local: image '%.200s': image import is not built yet", image);
}
