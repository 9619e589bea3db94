#!/bin/sh
# The shared conformance suite on `k8s` against a real cluster. Skips (exit 77) unless
# SBX_K8S_E2E=1 and SBX_K8S_CONFIG names an sbx config whose default data source is k8s.
# usage: e2e.sh PATH/TO/sbx_conformance
if [ "${SBX_K8S_E2E:-}" != 1 ]; then
	echo "k8s_e2e: skipped (set SBX_K8S_E2E=1 and SBX_K8S_CONFIG to run against a cluster)"
	exit 77
fi
if [ -z "${SBX_K8S_CONFIG:-}" ] || [ ! -r "$SBX_K8S_CONFIG" ]; then
	echo "k8s_e2e: SBX_K8S_CONFIG must name a readable sbx config file" >&2
	exit 1
fi
SBX_CONFORMANCE_CONFIG=$SBX_K8S_CONFIG
SBX_CONFORMANCE_IMAGE=${SBX_K8S_IMAGE:-busybox:latest}
SBX_CONFORMANCE_SKIP=${SBX_CONFORMANCE_SKIP:-pause_resume}
export SBX_CONFORMANCE_CONFIG SBX_CONFORMANCE_IMAGE SBX_CONFORMANCE_SKIP
exec "$1"
