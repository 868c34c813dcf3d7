#!/bin/bash
# Regenerates ctnetlink-goldens.json (captures only; the JSON wrapper with "setup"/"command" was written by hand):
#   unshare -n ./ctnetlink-capture.sh > cap.txt
# Runs conntrack-tools under strace inside a throwaway network namespace: never run it without `unshare -n`.
# The hex dumps of strace (-e write=3,4 -e read=3,4) are turned into hex strings by the python snippet at the end
# (python3 cap-to-json < cap.txt).
set -e
[ "$(ip -o link show | wc -l)" = 1 ] || { echo "run me under unshare -n (a fresh network namespace has only lo)" >&2; exit 1; }
conntrack -I -p udp -s 10.0.0.1 -d 10.96.0.10 --sport 40000 --dport 53 -r 10.244.1.2 -q 10.0.0.1 --reply-port-src 5353 --reply-port-dst 40000 -t 100 -u SEEN_REPLY >/dev/null 2>&1
conntrack -I -p tcp -s 10.0.0.1 -d 10.96.0.10 --sport 40001 --dport 80 -r 10.244.1.3 -q 10.0.0.1 --reply-port-src 8080 --reply-port-dst 40001 --state ESTABLISHED -t 100 -u SEEN_REPLY,ASSURED >/dev/null 2>&1
conntrack -I -p udp -s 10.0.0.2 -d 10.96.0.11 --sport 41000 --dport 8125 -t 100 -w 7 -m 42 >/dev/null 2>&1
conntrack -I -p udp -s fd00::1 -d fd00:96::10 --sport 40000 --dport 53 -r fd00:244::2 -q fd00::1 --reply-port-src 5353 --reply-port-dst 40000 -t 100 >/dev/null 2>&1
run() { name=$1; shift; echo "### $name"; strace -e trace=sendto,sendmsg,recvmsg,recvfrom -e write=3,4 -e read=3,4 "$@" 2>&1 >/dev/null; }
run list4 conntrack -L -f ipv4 -o id
run list6 conntrack -L -f ipv6 -o id
run mark conntrack -L --mark 42/0xff
run status conntrack -L --status ASSURED
run delete4 conntrack -D -p udp -s 10.0.0.1 -d 10.96.0.10 --sport 40000 --dport 53
run delete6 conntrack -D -f ipv6 -p udp -s fd00::1
# cap-to-json (python3):
#   import json,re,sys
#   out={}; cur=None; ev=None
#   for line in sys.stdin:
#       if line.startswith('### '): cur=line[4:].strip(); out[cur]=[]; continue
#       m=re.match(r'^(sendto|recvmsg|sendmsg|recvfrom)\((\d+),',line)
#       if m: ev={'dir':'send' if m.group(1).startswith('send') else 'recv','hex':''}; out[cur].append(ev); continue
#       m=re.match(r"^ \| [0-9a-f]{5}  (.{48})",line)
#       if m and ev is not None: ev['hex']+=m.group(1).replace(' ','')
#   json.dump({k:[e for e in v if e['hex']] for k,v in out.items()},sys.stdout,indent=1)
# create4 (captured on its own, in a fresh netns):
#   strace -e trace=sendto -e write=3 conntrack -I -p udp -s 10.0.0.1 -d 10.96.0.10 --sport 40000 --dport 53 \
#     -r 10.244.1.2 -q 10.0.0.1 --reply-port-src 5353 --reply-port-dst 40000 -t 100
