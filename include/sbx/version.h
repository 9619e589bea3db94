/* Version of the sbx library and of the plugin ABI it speaks. */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#define SBX_VERSION_MAJOR  0
#define SBX_VERSION_MINOR  1
#define SBX_VERSION_PATCH  0
#define SBX_VERSION_STRING "0.1.0"

/* Plugin ABI: a plugin's major must equal the host's; its minor must not exceed the host's.
 * The change log is at the top of plugin.h. */
#define SBX_ABI_MAJOR 1
#define SBX_ABI_MINOR 5

#endif
