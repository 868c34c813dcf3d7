#!/bin/sh
# Dev script (root; never touches the host ruleset: everything runs in a throwaway network namespace).
# For every rules/testdata/*.nft:
#   1. nft --debug=netlink -f X.nft  -> X.debug.txt  (libnftnl's view of every expression nft generated)
#   2. nft -c of the text, and a round trip: `nft list ruleset` output must load again with `nft -f`.
# Regenerate the .nft files first with: ./node_modules/.bin/node rules/testdata/gen.ts
set -eu
cd "$(dirname "$0")"
nft --version
for f in *.nft; do
  name="${f%.nft}"
  unshare -n sh -c "
    set -e
    nft --debug=netlink -f '$f' > '$name.debug.txt'
    nft list ruleset > /tmp/nftproxy-capture-list.\$\$
    nft flush ruleset
    nft -f /tmp/nftproxy-capture-list.\$\$
    rm -f /tmp/nftproxy-capture-list.\$\$
  "
  echo "captured $name.debug.txt (round trip ok)"
done
