/**
 * nlmsghdr/nfgenmsg framing, message types and flags, and parsing of what the kernel sends back.
 *
 * Sources: linux/netlink.h (nlmsghdr, NLM_F_*, NLMSG_*, nlmsgerr, NLMSGERR_ATTR_*), linux/netfilter/nfnetlink.h
 * (nfgenmsg, NFNL_SUBSYS_*, NFNL_MSG_BATCH_*, NFNL_BATCH_GENID), linux/netfilter/nf_tables.h (NFT_MSG_*).
 * Layout and byte orders: reference nftables-netlink.md §1.
 */
import type { NetlinkWriter } from './attrs.ts';
import { iterAttrs, read } from './attrs.ts';

/** linux/netlink.h: NLM_F_* request flags. */
export const NLM_F = {
  REQUEST: 0x1, MULTI: 0x2, ACK: 0x4, ECHO: 0x8, DUMP_INTR: 0x10, DUMP_FILTERED: 0x20,
  ROOT: 0x100, MATCH: 0x200, DUMP: 0x300,
  REPLACE: 0x100, EXCL: 0x200, CREATE: 0x400, APPEND: 0x800,
  NONREC: 0x100, CAPPED: 0x100, ACK_TLVS: 0x200,
} as const;

/** linux/netlink.h: control message types. */
export const NLMSG = { NOOP: 1, ERROR: 2, DONE: 3, OVERRUN: 4 } as const;
/** linux/netlink.h enum nlmsgerr_attrs. */
export const NLMSGERR_ATTR = { MSG: 1, OFFS: 2, COOKIE: 3, POLICY: 4, MISS_TYPE: 5, MISS_NEST: 6 } as const;

/** linux/netfilter/nfnetlink.h. */
export const NFNL_SUBSYS = { CTNETLINK: 1, NFTABLES: 10 } as const;
export const NFNL_MSG_BATCH_BEGIN = 0x10;
export const NFNL_MSG_BATCH_END = 0x11;
export const NFNL_BATCH_GENID = 1;
/** linux/netfilter/nfnetlink.h NFNLGRP_NFTABLES: the multicast group of ruleset change notifications. */
export const NFNLGRP_NFTABLES = 7;

/** linux/netfilter/nf_tables.h enum nf_tables_msg_types. */
export const NFT_MSG = {
  NEWTABLE: 0, GETTABLE: 1, DELTABLE: 2, NEWCHAIN: 3, GETCHAIN: 4, DELCHAIN: 5, NEWRULE: 6, GETRULE: 7, DELRULE: 8,
  NEWSET: 9, GETSET: 10, DELSET: 11, NEWSETELEM: 12, GETSETELEM: 13, DELSETELEM: 14, NEWGEN: 15, GETGEN: 16,
  TRACE: 17, NEWOBJ: 18, GETOBJ: 19, DELOBJ: 20, GETOBJ_RESET: 21, NEWFLOWTABLE: 22, GETFLOWTABLE: 23,
  DELFLOWTABLE: 24, GETRULE_RESET: 25, DESTROYTABLE: 26, DESTROYCHAIN: 27, DESTROYRULE: 28, DESTROYSET: 29,
  DESTROYSETELEM: 30, DESTROYOBJ: 31, DESTROYFLOWTABLE: 32, GETSETELEM_RESET: 33,
} as const;

/** nf_tables.h enum nft_gen_attributes. */
export const NFTA_GEN = { ID: 1, PROC_PID: 2, PROC_NAME: 3 } as const;

export const NLMSG_HDRLEN = 16;
export const NFGENMSG_LEN = 4;

/** Message type of an nf_tables message: (NFNL_SUBSYS_NFTABLES << 8) | msg. */
export const nftType = (msg: number): number => (NFNL_SUBSYS.NFTABLES << 8) | msg;

/**
 * Writes nlmsghdr (length patched by {@link endMessage}) and nfgenmsg. `resId` is written big-endian.
 * Returns the message start offset.
 */
export function beginMessage(w: NetlinkWriter, type: number, flags: number, seq: number, family: number, resId = 0): number {
  w.pad();
  const start = w.pos;
  w.ensure(NLMSG_HDRLEN + NFGENMSG_LEN);
  const b = w.buf;
  b.writeUInt32LE(0, start);
  b.writeUInt16LE(type, start + 4);
  b.writeUInt16LE(flags, start + 6);
  b.writeUInt32LE(seq >>> 0, start + 8);
  b.writeUInt32LE(0, start + 12);
  b[start + 16] = family;
  b[start + 17] = 0; // NFNETLINK_V0
  b.writeUInt16BE(resId, start + 18);
  w.pos = start + NLMSG_HDRLEN + NFGENMSG_LEN;
  return start;
}

/** Patches nlmsg_len (without the trailing padding) and pads. */
export function endMessage(w: NetlinkWriter, start: number): void {
  w.buf.writeUInt32LE(w.pos - start, start);
  w.pad();
}

/** A parsed netlink message: header fields, nfgenmsg, and the attribute payload (views into the datagram). */
export interface NetlinkMessage {
  len: number;
  type: number;
  flags: number;
  seq: number;
  pid: number;
  /** nfgenmsg family, version and res_id (host value); 0 for control messages. */
  family: number;
  resId: number;
  /** Attribute bytes after nfgenmsg (for nfnetlink messages) or the payload after nlmsghdr (for NLMSG_ERROR). */
  payload: Buffer;
}

/**
 * Splits a datagram into messages.
 * @throws Error on a truncated message, naming its offset and declared length.
 */
export function parseMessages(buf: Buffer): NetlinkMessage[] {
  const out: NetlinkMessage[] = [];
  let p = 0;
  while (p + NLMSG_HDRLEN <= buf.length) {
    const len = buf.readUInt32LE(p);
    if (len < NLMSG_HDRLEN || p + len > buf.length) throw new Error(`truncated netlink message at offset ${p}: nlmsg_len ${len}, ${buf.length - p} bytes left`);
    const type = buf.readUInt16LE(p + 4);
    const control = type < 0x10;
    out.push({
      len, type,
      flags: buf.readUInt16LE(p + 6),
      seq: buf.readUInt32LE(p + 8),
      pid: buf.readUInt32LE(p + 12),
      family: control || len < NLMSG_HDRLEN + NFGENMSG_LEN ? 0 : buf[p + 16],
      resId: control || len < NLMSG_HDRLEN + NFGENMSG_LEN ? 0 : buf.readUInt16BE(p + 18),
      payload: control ? buf.subarray(p + NLMSG_HDRLEN, p + len) : buf.subarray(p + NLMSG_HDRLEN + NFGENMSG_LEN, p + len),
    });
    p += (len + 3) & ~3;
  }
  return out;
}

/** An NLMSG_ERROR reply: `error` is 0 for an ACK, else a negative errno; ext-ack TLVs when present. */
export interface NetlinkError {
  seq: number;
  /** 0 = ACK, else -errno. */
  error: number;
  /** The request's header as echoed. */
  requestType: number;
  requestSeq: number;
  extAckMessage?: string;
  /** Byte offset of the offending attribute from the start of the failing request's nlmsghdr. */
  attrOffset?: number;
}

/**
 * Parses an NLMSG_ERROR payload (`struct nlmsgerr`: s32 error, then the request's nlmsghdr, then — unless
 * NLM_F_CAPPED — the request payload, then — with NLM_F_ACK_TLVS — extended-ACK attributes).
 */
export function parseError(m: NetlinkMessage): NetlinkError {
  const b = m.payload;
  const error = b.readInt32LE(0);
  const reqLen = b.readUInt32LE(4);
  const out: NetlinkError = { seq: m.seq, error, requestType: b.readUInt16LE(8), requestSeq: b.readUInt32LE(12) };
  if (m.flags & NLM_F.ACK_TLVS) {
    const capped = (m.flags & NLM_F.CAPPED) !== 0 || error === 0;
    const tlvStart = 4 + (capped ? NLMSG_HDRLEN : (reqLen + 3) & ~3);
    if (tlvStart < b.length) {
      for (const a of iterAttrs(b, tlvStart)) {
        if (a.type === NLMSGERR_ATTR.MSG) out.extAckMessage = read.str(a.data);
        else if (a.type === NLMSGERR_ATTR.OFFS) out.attrOffset = read.u32le(a.data);
      }
    }
  }
  return out;
}

/** Linux errno numbers (asm-generic/errno-base.h, asm-generic/errno.h; x86 and arm64) to names and texts. */
export const ERRNO: Record<number, [string, string]> = {
  1: ['EPERM', 'Operation not permitted'], 2: ['ENOENT', 'No such file or directory'], 4: ['EINTR', 'Interrupted system call'],
  5: ['EIO', 'Input/output error'], 7: ['E2BIG', 'Argument list too long'], 9: ['EBADF', 'Bad file descriptor'],
  11: ['EAGAIN', 'Resource temporarily unavailable'], 12: ['ENOMEM', 'Cannot allocate memory'], 13: ['EACCES', 'Permission denied'],
  14: ['EFAULT', 'Bad address'], 16: ['EBUSY', 'Device or resource busy'], 17: ['EEXIST', 'File exists'],
  19: ['ENODEV', 'No such device'], 22: ['EINVAL', 'Invalid argument'], 24: ['EMFILE', 'Too many open files'],
  28: ['ENOSPC', 'No space left on device'], 34: ['ERANGE', 'Numerical result out of range'], 61: ['ENODATA', 'No data available'],
  31: ['EMLINK', 'Too many links'], 85: ['ERESTART', 'Interrupted system call should be restarted'],
  90: ['EMSGSIZE', 'Message too long'], 93: ['EPROTONOSUPPORT', 'Protocol not supported'], 95: ['EOPNOTSUPP', 'Operation not supported'],
  97: ['EAFNOSUPPORT', 'Address family not supported by protocol'], 105: ['ENOBUFS', 'No buffer space available'],
  110: ['ETIMEDOUT', 'Connection timed out'],
};

/** `ENOENT (No such file or directory)` for 2 (or -2); `errno 999` for unknown numbers. */
export function errnoText(errno: number): string {
  const e = ERRNO[Math.abs(errno)];
  return e ? `${e[0]} (${e[1]})` : `errno ${Math.abs(errno)}`;
}

/** `ENOENT` for 2 (or -2). */
export function errnoName(errno: number): string {
  return ERRNO[Math.abs(errno)]?.[0] ?? `errno${Math.abs(errno)}`;
}
