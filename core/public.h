/* Exports the definitions of the public API: libsbx is compiled with -fvisibility=hidden, so
 * each public function's definition carries SBX__PUBLIC and nothing else leaves the library. */
#ifndef SBX_PUBLIC_H
#define SBX_PUBLIC_H

#define SBX__PUBLIC __attribute__((visibility("default")))

#endif
