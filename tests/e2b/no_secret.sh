#!/bin/sh
# Fails when the API key ($E2B_API_KEY) appears in any file under the given folders (state, stand-in
# logs, CTest logs) or when there is nothing to search. CTest's own record of the test
# environment (E2B_API_KEY=...) is where the key is handed in, so those lines do not count.
set -u
key=${E2B_API_KEY:?E2B_API_KEY is not set}
found=0
files=0
for d in "$@"; do
	[ -e "$d" ] || continue
	for f in $(find "$d" -type f); do
		files=$((files + 1))
		if grep -F -- "$key" "$f" | grep -vqF -- "E2B_API_KEY=$key"; then
			echo "no_secret: the API key appears in $f" >&2
			found=1
		fi
	done
done
if [ "$files" -eq 0 ]; then
	echo "no_secret: nothing to search in $*" >&2
	exit 1
fi
[ "$found" -eq 0 ] || exit 1
echo "no_secret: $files files searched, no API key"
