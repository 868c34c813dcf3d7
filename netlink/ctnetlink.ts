/**
 * ctnetlink codec: the conntrack subsystem of nfnetlink (NFNL_SUBSYS_CTNETLINK = 1). Encodes dump requests
 * (IPCTNL_MSG_CT_GET with NLM_F_DUMP, optionally filtered in the kernel) and deletes (IPCTNL_MSG_CT_DELETE by
 * original tuple and CTA_ID), and decodes the flows the kernel sends back (IPCTNL_MSG_CT_NEW). No I/O here; the
 * socket is netlink/ct-socket.ts.
 *
 * Sources: linux/netfilter/nfnetlink_conntrack.h (IPCTNL_MSG_*, CTA_*, CTA_TUPLE_*, CTA_IP_*, CTA_PROTO_*,
 * CTA_FILTER_*), linux/netfilter/nf_conntrack_common.h (IPS_* status bits), net/netfilter/nf_internals.h
 * (CTA_FILTER_F_* flag bits: kernel ABI, not exported in uapi), net/netfilter/nf_conntrack_netlink.c
 * (byte orders and which attributes a request needs). Wire layout, as captured from conntrack-tools 1.4.7
 * (netlink/testdata/ctnetlink-goldens.json):
 *
 *   nlmsghdr | nfgenmsg { family = NFPROTO_IPV4 (2) | NFPROTO_IPV6 (10), version 0, res_id 0 }
 *   CTA_TUPLE_ORIG (nested)                     CTA_TUPLE_REPLY (nested, same shape)
 *     CTA_TUPLE_IP (nested)
 *       CTA_IP_V4_SRC / CTA_IP_V4_DST           4 bytes, network order   (IPv6: CTA_IP_V6_SRC/DST, 16 bytes)
 *     CTA_TUPLE_PROTO (nested)
 *       CTA_PROTO_NUM                           u8 (17 = UDP)
 *       CTA_PROTO_SRC_PORT / CTA_PROTO_DST_PORT u16 big-endian
 *     CTA_TUPLE_ZONE                            u16 big-endian (optional)
 *   CTA_STATUS u32be, CTA_TIMEOUT u32be (s), CTA_MARK u32be, CTA_USE u32be, CTA_ID u32be, CTA_ZONE u16be
 *   CTA_FILTER (nested, dump requests only, kernel >= 5.10)
 *     CTA_FILTER_ORIG_FLAGS / CTA_FILTER_REPLY_FLAGS  u32 HOST order (nla_get_u32), CTA_FILTER_F_* bits
 *
 * The kernel sets NLA_F_NESTED on the nests it sends and so do we (as libnetfilter_conntrack does).
 */
import { NetlinkWriter, attrMap, iterAttrs, read } from './attrs.ts';
import { NFNL_SUBSYS, NLM_F, beginMessage, endMessage, type NetlinkMessage } from './message.ts';
import { formatAddr, parseAddr } from './addr.ts';

/** linux/netfilter/nfnetlink_conntrack.h enum cntl_msg_types. */
export const IPCTNL_MSG = { CT_NEW: 0, CT_GET: 1, CT_DELETE: 2 } as const;

/** Message type of a ctnetlink message: (NFNL_SUBSYS_CTNETLINK << 8) | msg. */
export const ctType = (msg: number): number => (NFNL_SUBSYS.CTNETLINK << 8) | msg;

/** nfnetlink_conntrack.h enum ctattr_type. */
export const CTA = {
  TUPLE_ORIG: 1, TUPLE_REPLY: 2, STATUS: 3, PROTOINFO: 4, HELP: 5, NAT_SRC: 6, TIMEOUT: 7, MARK: 8,
  COUNTERS_ORIG: 9, COUNTERS_REPLY: 10, USE: 11, ID: 12, NAT_DST: 13, TUPLE_MASTER: 14, SEQ_ADJ_ORIG: 15,
  SEQ_ADJ_REPLY: 16, SECMARK: 17, ZONE: 18, SECCTX: 19, TIMESTAMP: 20, MARK_MASK: 21, LABELS: 22,
  LABELS_MASK: 23, SYNPROXY: 24, FILTER: 25, STATUS_MASK: 26,
} as const;
/** enum ctattr_tuple. */
export const CTA_TUPLE = { IP: 1, PROTO: 2, ZONE: 3 } as const;
/** enum ctattr_ip. */
export const CTA_IP = { V4_SRC: 1, V4_DST: 2, V6_SRC: 3, V6_DST: 4 } as const;
/** enum ctattr_l4proto. */
export const CTA_PROTO = { NUM: 1, SRC_PORT: 2, DST_PORT: 3, ICMP_ID: 4, ICMP_TYPE: 5, ICMP_CODE: 6 } as const;
/** enum ctattr_filter. */
export const CTA_FILTER = { ORIG_FLAGS: 1, REPLY_FLAGS: 2 } as const;
/** net/netfilter/nf_internals.h CTA_FILTER_F_*: which tuple fields a CTA_FILTER tuple constrains. */
export const CTA_FILTER_F = {
  IP_SRC: 1 << 0, IP_DST: 1 << 1, TUPLE_ZONE: 1 << 2, PROTO_NUM: 1 << 3, PROTO_SRC_PORT: 1 << 4, PROTO_DST_PORT: 1 << 5,
} as const;
/** linux/netfilter/nf_conntrack_common.h enum ip_conntrack_status (bits of CTA_STATUS). */
export const IPS = {
  EXPECTED: 1 << 0, SEEN_REPLY: 1 << 1, ASSURED: 1 << 2, CONFIRMED: 1 << 3, SRC_NAT: 1 << 4, DST_NAT: 1 << 5,
  SEQ_ADJUST: 1 << 6, SRC_NAT_DONE: 1 << 7, DST_NAT_DONE: 1 << 8, DYING: 1 << 9, FIXED_TIMEOUT: 1 << 10,
  TEMPLATE: 1 << 11, UNTRACKED: 1 << 12, HELPER: 1 << 13, OFFLOAD: 1 << 14, HW_OFFLOAD: 1 << 15,
} as const;
/** IANA protocol numbers used here (netinet/in.h IPPROTO_*). */
export const IPPROTO = { ICMP: 1, TCP: 6, UDP: 17, ICMPV6: 58, SCTP: 132 } as const;

/** The conntrack L3 families (nfgenmsg.nfgen_family; linux/netfilter.h NFPROTO_IPV4 = 2, NFPROTO_IPV6 = 10). */
export type CtFamily = 'ipv4' | 'ipv6';
export const CT_FAMILY_NUMBER: Record<CtFamily, number> = { ipv4: 2, ipv6: 10 };

/** A conntrack tuple. Addresses are text (IPv4 dotted quad, IPv6 RFC 5952); ports in host order. */
export interface CtTuple {
  src: string;
  dst: string;
  /** IP protocol number (IPPROTO). */
  proto: number;
  /** 0 when the protocol has no ports (ICMP) or the kernel did not send it. */
  sport: number;
  dport: number;
  /** CTA_TUPLE_ZONE when present. */
  zone?: number;
}

/** A flow as the kernel reports it (IPCTNL_MSG_CT_NEW). */
export interface CtFlow {
  family: CtFamily;
  orig: CtTuple;
  reply: CtTuple;
  /** CTA_ID: a per-flow cookie; a delete that carries it only matches this very flow. */
  id: number;
  /** IPS_* bits. */
  status: number;
  /** Seconds left (CTA_TIMEOUT). */
  timeout: number;
  mark: number;
  /** CTA_ZONE, 0 when absent. */
  zone: number;
  use: number;
}

/** A partial tuple for kernel-side filtering: only the fields given are compared. */
export interface CtTupleFilter {
  src?: string;
  dst?: string;
  /** Required when a port is given (the kernel refuses port filters without a protocol: EINVAL). */
  proto?: number;
  sport?: number;
  dport?: number;
}

/** Kernel-side filter of a dump. Everything given must match (AND). */
export interface CtDumpFilter {
  /** Original-direction tuple fields (CTA_FILTER ORIG_FLAGS; kernel >= 5.10). */
  orig?: CtTupleFilter;
  /** Reply-direction tuple fields (CTA_FILTER REPLY_FLAGS; kernel >= 5.10). */
  reply?: CtTupleFilter;
  /** `(ct.mark & mask) == value` (CTA_MARK / CTA_MARK_MASK; kernel >= 4.x). */
  mark?: { value: number; mask: number };
  /** `(ct.status & mask) == value` (CTA_STATUS / CTA_STATUS_MASK; kernel >= 5.19). */
  status?: { value: number; mask: number };
}

// ---------------------------------------------------------------------------------------------- addresses

/**
 * Parses an address of `family` into network-order bytes (4 or 16).
 * @throws Error naming `field` and the value when it is not an address of that family.
 */
export function ctAddrBytes(family: CtFamily, s: string, field: string): Uint8Array {
  return parseAddr(family === 'ipv4' ? 'ip' : 'ip6', s, field);
}

/** Formats 4 or 16 network-order bytes as canonical text (RFC 5952, like inet_ntop; netlink/addr.ts). */
export const ctAddrText: (b: Uint8Array) => string = formatAddr;

// ---------------------------------------------------------------------------------------------- encoding

function checkPort(v: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 65535) throw new Error(`${field}: ${v} is not a port (0-65535)`);
  return v;
}

function checkU32(v: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new Error(`${field}: ${v} is not an unsigned 32-bit value`);
  return v;
}

/**
 * Writes one tuple nest (`type` = CTA_TUPLE_ORIG or CTA_TUPLE_REPLY) with the fields present in `t`; returns the
 * CTA_FILTER_F_* flags of the fields written. A full tuple (delete) writes src, dst, proto and both ports, in the
 * order conntrack-tools writes them.
 */
function writeTuple(w: NetlinkWriter, type: number, family: CtFamily, t: CtTupleFilter, what: string): number {
  let flags = 0;
  const tuple = w.nest(type);
  if (t.src !== undefined || t.dst !== undefined) {
    const ip = w.nest(CTA_TUPLE.IP);
    const v4 = family === 'ipv4';
    if (t.src !== undefined) { w.attrBytes(v4 ? CTA_IP.V4_SRC : CTA_IP.V6_SRC, ctAddrBytes(family, t.src, `${what}.src`)); flags |= CTA_FILTER_F.IP_SRC; }
    if (t.dst !== undefined) { w.attrBytes(v4 ? CTA_IP.V4_DST : CTA_IP.V6_DST, ctAddrBytes(family, t.dst, `${what}.dst`)); flags |= CTA_FILTER_F.IP_DST; }
    w.end(ip);
  }
  if (t.proto !== undefined || t.sport !== undefined || t.dport !== undefined) {
    if (t.proto === undefined) throw new Error(`${what}.proto: required when a port is given (the kernel refuses port filters without a protocol)`);
    if (!Number.isInteger(t.proto) || t.proto < 0 || t.proto > 255) throw new Error(`${what}.proto: ${t.proto} is not an IP protocol number (0-255)`);
    const proto = w.nest(CTA_TUPLE.PROTO);
    w.attrU8(CTA_PROTO.NUM, t.proto);
    flags |= CTA_FILTER_F.PROTO_NUM;
    if (t.sport !== undefined) { w.attrU16be(CTA_PROTO.SRC_PORT, checkPort(t.sport, `${what}.sport`)); flags |= CTA_FILTER_F.PROTO_SRC_PORT; }
    if (t.dport !== undefined) { w.attrU16be(CTA_PROTO.DST_PORT, checkPort(t.dport, `${what}.dport`)); flags |= CTA_FILTER_F.PROTO_DST_PORT; }
    w.end(proto);
  }
  w.end(tuple);
  return flags;
}

/**
 * Appends a dump request for `family` to `w`: IPCTNL_MSG_CT_GET with NLM_F_REQUEST|NLM_F_DUMP. The nfgenmsg
 * family makes the kernel skip flows of the other family; `filter` narrows further inside the kernel.
 * @throws Error naming the field for a bad address, port or protocol.
 */
export function encodeDumpRequest(w: NetlinkWriter, seq: number, family: CtFamily, filter: CtDumpFilter = {}): void {
  const s = beginMessage(w, ctType(IPCTNL_MSG.CT_GET), NLM_F.REQUEST | NLM_F.DUMP, seq, CT_FAMILY_NUMBER[family]);
  let origFlags = 0, replyFlags = 0;
  if (filter.orig && Object.values(filter.orig).some((v) => v !== undefined)) origFlags = writeTuple(w, CTA.TUPLE_ORIG, family, filter.orig, 'filter.orig');
  if (filter.reply && Object.values(filter.reply).some((v) => v !== undefined)) replyFlags = writeTuple(w, CTA.TUPLE_REPLY, family, filter.reply, 'filter.reply');
  if (filter.status) {
    w.attrU32be(CTA.STATUS, checkU32(filter.status.value, 'filter.status.value'));
    if (filter.status.mask === 0) throw new Error('filter.status.mask: 0 matches everything; leave the status filter out instead');
  }
  if (filter.mark) w.attrU32be(CTA.MARK, checkU32(filter.mark.value, 'filter.mark.value'));
  if (filter.mark) w.attrU32be(CTA.MARK_MASK, checkU32(filter.mark.mask, 'filter.mark.mask'));
  if (filter.status) w.attrU32be(CTA.STATUS_MASK, checkU32(filter.status.mask, 'filter.status.mask'));
  if (origFlags || replyFlags) {
    const f = w.nest(CTA.FILTER);
    if (origFlags) w.attrU32le(CTA_FILTER.ORIG_FLAGS, origFlags);
    if (replyFlags) w.attrU32le(CTA_FILTER.REPLY_FLAGS, replyFlags);
    w.end(f);
  }
  endMessage(w, s);
}

/** What a delete needs: the flow's original tuple (full), its CTA_ID and zone. */
export interface CtDeleteSpec {
  family: CtFamily;
  orig: CtTuple;
  id: number;
  zone?: number;
}

/**
 * Appends IPCTNL_MSG_CT_DELETE (NLM_F_REQUEST|NLM_F_ACK) for one flow: CTA_TUPLE_ORIG (src, dst, proto, ports),
 * CTA_ID (u32be) and CTA_ZONE (u16be, only when non-zero). The kernel looks the flow up by tuple and zone and
 * deletes it only if its id matches; otherwise it answers ENOENT (net/netfilter/nf_conntrack_netlink.c
 * ctnetlink_del_conntrack), so a newer flow that reuses the tuple is not deleted. Caveat: the kernel computes the
 * id as a siphash of the conn's address, master, netns and ORIGINAL tuple (nf_conntrack_core.c nf_ct_get_id),
 * so a new flow with the same original tuple that lands in the freed slab slot gets the same id (observed in
 * e2e/conntrack.test.ts); deleting it then costs one re-created flow, which is classified afresh.
 * @throws Error naming the field for a bad address, port, protocol or id.
 */
export function encodeDelete(w: NetlinkWriter, seq: number, d: CtDeleteSpec): void {
  const s = beginMessage(w, ctType(IPCTNL_MSG.CT_DELETE), NLM_F.REQUEST | NLM_F.ACK, seq, CT_FAMILY_NUMBER[d.family]);
  const o = d.orig;
  writeTuple(w, CTA.TUPLE_ORIG, d.family, { src: o.src, dst: o.dst, proto: o.proto, sport: o.sport, dport: o.dport }, 'orig');
  w.attrU32be(CTA.ID, checkU32(d.id, 'id'));
  if (d.zone) {
    if (!Number.isInteger(d.zone) || d.zone < 0 || d.zone > 0xffff) throw new Error(`zone: ${d.zone} is not a conntrack zone (0-65535)`);
    w.attrU16be(CTA.ZONE, d.zone);
  }
  endMessage(w, s);
}

/** A flow to create (tests and benchmarks): both tuples, the timeout in seconds, optional status bits. */
export interface CtCreateSpec {
  family: CtFamily;
  orig: CtTuple;
  reply: CtTuple;
  timeoutSeconds: number;
  status?: number;
  /** TCP only: CTA_PROTOINFO_TCP_STATE (linux/netfilter/nf_conntrack_tcp.h: 3 = ESTABLISHED); the kernel needs it. */
  tcpState?: number;
}

/**
 * Appends IPCTNL_MSG_CT_NEW with NLM_F_REQUEST|NLM_F_ACK|NLM_F_EXCL|NLM_F_CREATE, as `conntrack -I` sends it:
 * CTA_TUPLE_ORIG, CTA_TUPLE_REPLY, CTA_TIMEOUT (u32be seconds; the kernel requires it), CTA_STATUS when given.
 * @throws Error naming the field for a bad address, port, protocol or timeout.
 */
export function encodeCreate(w: NetlinkWriter, seq: number, c: CtCreateSpec): void {
  const s = beginMessage(w, ctType(IPCTNL_MSG.CT_NEW), NLM_F.REQUEST | NLM_F.ACK | NLM_F.EXCL | NLM_F.CREATE, seq, CT_FAMILY_NUMBER[c.family]);
  writeTuple(w, CTA.TUPLE_ORIG, c.family, c.orig, 'orig');
  writeTuple(w, CTA.TUPLE_REPLY, c.family, c.reply, 'reply');
  if (c.status !== undefined) w.attrU32be(CTA.STATUS, checkU32(c.status, 'status'));
  w.attrU32be(CTA.TIMEOUT, checkU32(c.timeoutSeconds, 'timeoutSeconds'));
  if (c.tcpState !== undefined) {
    const pi = w.nest(CTA.PROTOINFO);
    const tcp = w.nest(1); // CTA_PROTOINFO_TCP
    w.attrU8(1, c.tcpState); // CTA_PROTOINFO_TCP_STATE
    w.end(tcp);
    w.end(pi);
  }
  endMessage(w, s);
}

// ---------------------------------------------------------------------------------------------- decoding

function decodeTuple(buf: Buffer, what: string): CtTuple {
  const t: CtTuple = { src: '', dst: '', proto: 0, sport: 0, dport: 0 };
  for (const a of iterAttrs(buf)) {
    if (a.type === CTA_TUPLE.IP) {
      for (const ip of iterAttrs(a.data)) {
        if (ip.type === CTA_IP.V4_SRC || ip.type === CTA_IP.V6_SRC) t.src = ctAddrText(ip.data);
        else if (ip.type === CTA_IP.V4_DST || ip.type === CTA_IP.V6_DST) t.dst = ctAddrText(ip.data);
      }
    } else if (a.type === CTA_TUPLE.PROTO) {
      for (const p of iterAttrs(a.data)) {
        if (p.type === CTA_PROTO.NUM) t.proto = read.u8(p.data);
        else if (p.type === CTA_PROTO.SRC_PORT) t.sport = read.u16be(p.data);
        else if (p.type === CTA_PROTO.DST_PORT) t.dport = read.u16be(p.data);
      }
    } else if (a.type === CTA_TUPLE.ZONE) {
      t.zone = read.u16be(a.data);
    }
  }
  if (!t.src || !t.dst) throw new Error(`${what}: the tuple has no CTA_TUPLE_IP source and destination`);
  return t;
}

/**
 * Decodes one IPCTNL_MSG_CT_NEW message (a dump reply or an event).
 * @throws Error when it is not a ctnetlink flow message, or when the tuples or CTA_ID are missing or malformed.
 */
export function decodeFlow(m: NetlinkMessage): CtFlow {
  if (m.type !== ctType(IPCTNL_MSG.CT_NEW)) throw new Error(`not a ctnetlink flow message: nlmsg_type 0x${m.type.toString(16)}`);
  const family: CtFamily | null = m.family === 2 ? 'ipv4' : m.family === 10 ? 'ipv6' : null;
  if (!family) throw new Error(`ctnetlink flow of unsupported family ${m.family}`);
  const attrs = attrMap(m.payload);
  const orig = attrs.get(CTA.TUPLE_ORIG), reply = attrs.get(CTA.TUPLE_REPLY), id = attrs.get(CTA.ID);
  if (!orig || !reply) throw new Error('ctnetlink flow without CTA_TUPLE_ORIG and CTA_TUPLE_REPLY');
  if (!id) throw new Error('ctnetlink flow without CTA_ID');
  const u32 = (t: number) => { const b = attrs.get(t); return b ? read.u32be(b) : 0; };
  const zone = attrs.get(CTA.ZONE);
  return {
    family, orig: decodeTuple(orig, 'CTA_TUPLE_ORIG'), reply: decodeTuple(reply, 'CTA_TUPLE_REPLY'),
    id: read.u32be(id), status: u32(CTA.STATUS), timeout: u32(CTA.TIMEOUT), mark: u32(CTA.MARK), use: u32(CTA.USE),
    zone: zone ? read.u16be(zone) : 0,
  };
}
