/* `image:` in a build without libarchive or libcrypto. */
#include "local.h"

int sbx__local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
			    sbx_error *err)
{
	(void)st;
	(void)cap;
	buf[0] = '\0';
	return sbx__local_host->set_error(err, SBX_E_UNSUPPORTED,
					  "local: image '%.200s': this sbx was built without "
					  "libarchive or libcrypto, which image archives need",
					  image);
}

int sbx__local_image_env_copy(const char *rootfs, const char *sandbox_dir, sbx_error *err)
{
	(void)rootfs;
	(void)sandbox_dir;
	(void)err;
	return SBX_OK;
}

int sbx__local_image_supported(void)
{
	return 0;
}
