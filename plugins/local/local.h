/* local.c: the plugin's keys, init and fini, info and descriptor. It shares nothing:
 * this header only names the unit. */
#ifndef SBX_LOCAL_LOCAL_H
#define SBX_LOCAL_LOCAL_H

#endif
