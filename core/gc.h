/* What gc.c (ledger listing and reaping) needs from host.c beyond the public API. */
#ifndef SBX_GC_H
#define SBX_GC_H

#include "internal.h"
#include "ledger.h"

/* The host's ledger ($state_dir/ledger.db), opened on first use. Thread-safe. */
int sbx__host_ledger(sbx_host *h, sbx__ledger **out, sbx_error *err);
/* This machine's name as recorded in ledger rows. */
const char *sbx__host_name(const sbx_host *h);
/* Value of the sbx.ledger label this host puts on its sandboxes (host and state dir). */
const char *sbx__host_ledger_id(const sbx_host *h);
/* This process as a ledger actor. */
sbx__ledger_actor sbx__host_actor(const sbx_host *h);
/* Runs alias's list_by_label (SBX_E_UNSUPPORTED when the plugin has none). */
int sbx__host_list_by_label(sbx_host *h, const char *alias, const char *key, const char *value,
			    sbx_id_fn fn, void *ctx, sbx_error *err);

#endif
