/* sbx-support: everything of the plugin-support library (libsbx-support.a), for a plugin
 * that wants it all. Link with `pkg-config --libs sbx-support` or Sbx::support. */
#ifndef SBX_SUPPORT_H
#define SBX_SUPPORT_H

#include <sbx/support/base64.h>
#include <sbx/support/buf.h>
#include <sbx/support/clock.h>
#include <sbx/support/conf.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/json.h>
#include <sbx/support/path.h>
#include <sbx/support/random.h>
#include <sbx/support/rexec.h>

#endif
