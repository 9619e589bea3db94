/* Image archives for the isolated level (see ns.c): not imported yet. */
#include <sbx/support/host.h>

#include "image.h"
#include "state.h"

int local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
		       sbx_error *err)
{
	(void)st;
	(void)cap;
	buf[0] = '\0';
	return sbxs_host->set_error(err, SBX_E_UNSUPPORTED,
				    "local: image '%.200s': image import is not built yet", image);
}
