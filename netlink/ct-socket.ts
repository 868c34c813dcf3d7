/**
 * A NETLINK_NETFILTER socket for ctnetlink (the conntrack table), over the libc calls of netlink/libc.ts
 * like netlink/socket.ts (which stays the nf_tables socket). Two operations: a kernel-filtered dump and a batch of
 * deletes by original tuple and CTA_ID.
 *
 * A netlink dump is paced by the reader: the kernel fills the next datagram only when we read the previous one,
 * so a dump cannot overflow the receive buffer. Deletes are many IPCTNL_MSG_CT_DELETE messages packed into one
 * datagram (nfnetlink processes every message of a datagram in turn, netlink_rcv_skb), each with NLM_F_ACK, so
 * every delete gets its own verdict: 0, or ENOENT when the flow is gone or its id no longer matches.
 */
import { AF_NETLINK, SOCK_RAW, SOCK_CLOEXEC, NETLINK_NETFILTER, SOL_SOCKET, SO_RCVBUF, SO_RCVBUFFORCE, SOL_NETLINK, NETLINK_CAP_ACK, NETLINK_EXT_ACK, MSG_DONTWAIT, POLLIN, EAGAIN, EINTR, ENOENT, ENOBUFS, ETIMEDOUT, loadLibc, type Libc } from './libc.ts';
import { NetlinkWriter } from './attrs.ts';
import { NLMSG, NLM_F, errnoText, parseError, parseMessages, type NetlinkMessage } from './message.ts';
import {
  IPCTNL_MSG, ctAddrBytes, ctAddrText, ctType, decodeFlow, encodeCreate, encodeDelete, encodeDumpRequest,
  type CtCreateSpec, type CtDeleteSpec, type CtDumpFilter, type CtFamily, type CtFlow, type CtTuple, type CtTupleFilter,
} from './ctnetlink.ts';

/** A failed system call or ctnetlink request, with its positive errno. */
export class ConntrackSocketError extends Error {
  readonly errno: number;
  constructor(what: string, errno: number) {
    super(`${what}: ${errnoText(errno)}`);
    this.name = 'ConntrackSocketError';
    this.errno = errno;
  }
}

/** What a batch of deletes did. */
export interface DeleteResult {
  /** Flows the kernel deleted. */
  deleted: number;
  /** Flows already gone, or whose tuple now belongs to a newer flow (id mismatch): ENOENT, left alone. */
  missing: number;
  /** Other failures: index into the request list and errno. */
  failed: Array<{ index: number; errno: number }>;
}

/** Options of {@link ConntrackSocket.open}. */
export interface ConntrackSocketOptions {
  /** Receive buffer in bytes (SO_RCVBUFFORCE, else SO_RCVBUF; the kernel doubles it). Default 4 MiB. */
  rcvbufBytes?: number;
  /** Largest datagram of deletes sent at once, in bytes. Default 64 KiB. */
  deleteChunkBytes?: number;
  /** How long to wait for the kernel, per datagram, in ms. Default 10 s. */
  timeoutMs?: number;
}

const hasAddr = (f: CtDumpFilter) => [f.orig, f.reply].some((t) => t && (t.src !== undefined || t.dst !== undefined));
const withoutAddr = (t: CtTupleFilter): CtTupleFilter => ({ proto: t.proto, sport: t.sport, dport: t.dport });
const sameAddr = (family: CtFamily, a: string, b: string) => ctAddrText(ctAddrBytes(family, a, 'filter address')) === b;

/** A ctnetlink socket. Calls are synchronous system calls, serialised by the caller (the agent is single-threaded). */
export class ConntrackSocket {
  readonly #libc: Libc;
  readonly #fd: number;
  readonly #rbuf = Buffer.alloc(1 << 18);
  readonly #chunk: number;
  readonly #timeoutMs: number;
  #seq: number;
  #closed = false;

  private constructor(libc: Libc, fd: number, opts: ConntrackSocketOptions) {
    this.#libc = libc;
    this.#fd = fd;
    this.#chunk = opts.deleteChunkBytes ?? 64 << 10;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#seq = (Date.now() & 0x3fffffff) >>> 0;
  }

  /**
   * Opens the socket and sets NETLINK_CAP_ACK and NETLINK_EXT_ACK.
   * @throws ConntrackSocketError naming the call (EPROTONOSUPPORT without nfnetlink, EPERM without CAP_NET_ADMIN
   *   happens later, on the first request).
   */
  static open(opts: ConntrackSocketOptions = {}): ConntrackSocket {
    const libc = loadLibc();
    const fd = libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) throw new ConntrackSocketError('socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)', libc.errno());
    const sock = new ConntrackSocket(libc, fd, opts);
    try {
      const addr = Buffer.alloc(12);
      addr.writeUInt16LE(AF_NETLINK, 0);
      if (libc.bind(fd, addr, 12) < 0) throw new ConntrackSocketError('bind(AF_NETLINK)', libc.errno());
      const v = Buffer.alloc(4);
      v.writeInt32LE(opts.rcvbufBytes ?? 4 << 20, 0);
      if (libc.setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, v, 4) < 0 && libc.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, v, 4) < 0) {
        throw new ConntrackSocketError('setsockopt(SO_RCVBUF)', libc.errno());
      }
      v.writeInt32LE(1, 0);
      if (libc.setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, v, 4) < 0) throw new ConntrackSocketError('setsockopt(NETLINK_CAP_ACK)', libc.errno());
      if (libc.setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, v, 4) < 0) throw new ConntrackSocketError('setsockopt(NETLINK_EXT_ACK)', libc.errno());
    } catch (err) {
      libc.close(fd);
      throw err;
    }
    return sock;
  }

  #nextSeq(): number {
    this.#seq = (this.#seq + 1) >>> 0;
    return this.#seq;
  }

  #send(buf: Buffer, what: string): void {
    if (this.#closed) throw new Error('ConntrackSocket is closed');
    if (Number(this.#libc.send(this.#fd, buf, buf.length, 0)) < 0) throw new ConntrackSocketError(what, this.#libc.errno());
  }

  /** Receives one datagram, waiting up to the timeout. */
  #recv(): NetlinkMessage[] {
    const deadline = Date.now() + this.#timeoutMs;
    const pfd = Buffer.alloc(8);
    for (;;) {
      const n = Number(this.#libc.recv(this.#fd, this.#rbuf, this.#rbuf.length, MSG_DONTWAIT));
      if (n > 0) return parseMessages(Buffer.from(this.#rbuf.subarray(0, n)));
      const errno = n < 0 ? this.#libc.errno() : 0;
      if (n === 0 || (errno !== EAGAIN && errno !== EINTR)) throw new ConntrackSocketError('recv', errno || 5);
      const left = deadline - Date.now();
      if (left <= 0) throw new ConntrackSocketError('recv: no reply from the kernel in time', ETIMEDOUT);
      pfd.writeInt32LE(this.#fd, 0);
      pfd.writeInt16LE(POLLIN, 4);
      this.#libc.poll(pfd, 1, Math.min(left, 1000));
    }
  }

  /**
   * Dumps the flows of `family` that match `filter`, filtered by the kernel. A dump the kernel marks
   * NLM_F_DUMP_INTR (the table changed under it) is restarted, up to 5 times; after that its flows are returned
   * as they are (like upstream, which accepts partial results).
   *
   * IPv6 address fields of a filter are applied here, not in the kernel: the kernel's IPv6 address comparison in
   * ctnetlink_filter_match_tuple is inverted (`!ipv6_addr_cmp()`, net/netfilter/nf_conntrack_netlink.c, still so on
   * 6.18: a filter on fd00::10 returns every flow EXCEPT those to fd00::10). Protocol and port filters work in both
   * families and stay in the kernel.
   * @throws ConntrackSocketError with the errno the kernel answered (EINVAL: a filter this kernel does not accept;
   *   EPERM: no CAP_NET_ADMIN), or for a socket failure.
   */
  dump(family: CtFamily, filter: CtDumpFilter = {}): CtFlow[] {
    if (family === 'ipv6' && hasAddr(filter)) {
      const kernel: CtDumpFilter = { ...filter, orig: filter.orig && withoutAddr(filter.orig), reply: filter.reply && withoutAddr(filter.reply) };
      const want = (t: CtTupleFilter | undefined, f: CtTuple) =>
        !t || ((t.src === undefined || sameAddr(family, t.src, f.src)) && (t.dst === undefined || sameAddr(family, t.dst, f.dst)));
      return this.#dump(family, kernel).filter((f) => want(filter.orig, f.orig) && want(filter.reply, f.reply));
    }
    return this.#dump(family, filter);
  }

  #dump(family: CtFamily, filter: CtDumpFilter): CtFlow[] {
    let flows: CtFlow[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
      const seq = this.#nextSeq();
      const w = new NetlinkWriter(512);
      encodeDumpRequest(w, seq, family, filter);
      this.#send(Buffer.from(w.bytes()), 'send(IPCTNL_MSG_CT_GET)');
      flows = [];
      let interrupted = false;
      for (let done = false; !done;) {
        for (const m of this.#recv()) {
          if (m.seq !== seq) continue;
          if (m.flags & NLM_F.DUMP_INTR) interrupted = true;
          if (m.type === NLMSG.DONE) { done = true; break; }
          if (m.type === NLMSG.ERROR) {
            const e = parseError(m);
            if (e.error === 0) { done = true; break; }
            throw new ConntrackSocketError(`conntrack dump (${family})${e.extAckMessage ? ` [${e.extAckMessage}]` : ''}`, -e.error);
          }
          if (m.type === ctType(IPCTNL_MSG.CT_NEW)) flows.push(decodeFlow(m));
        }
      }
      if (!interrupted) return flows;
    }
    return flows;
  }

  /**
   * Deletes flows by original tuple, zone and CTA_ID. Messages are packed into datagrams of at most
   * `deleteChunkBytes`; every message is acknowledged. ENOENT (gone, or the tuple now belongs to another flow)
   * is counted in `missing`, not as a failure.
   * @throws Error naming the field of a malformed spec; ConntrackSocketError for a socket failure.
   */
  deleteFlows(specs: readonly CtDeleteSpec[]): DeleteResult {
    const r = this.#acked(specs, encodeDelete, 'IPCTNL_MSG_CT_DELETE');
    const result: DeleteResult = { deleted: r.ok, missing: r.unknown, failed: [] };
    for (const f of r.failed) {
      if (f.errno === ENOENT) result.missing++;
      else result.failed.push(f);
    }
    return result;
  }

  /**
   * Creates flows (tests and benchmarks), packed and acknowledged like {@link deleteFlows}.
   * @returns how many were created, and the failures (EEXIST: the tuple is taken).
   */
  createFlows(specs: readonly CtCreateSpec[]): { created: number; failed: Array<{ index: number; errno: number }> } {
    const r = this.#acked(specs, encodeCreate, 'IPCTNL_MSG_CT_NEW');
    return { created: r.ok, failed: r.failed };
  }

  /** Sends one acknowledged message per spec, in datagrams of at most `deleteChunkBytes`, and tallies the acks. */
  #acked<T>(specs: readonly T[], encode: (w: NetlinkWriter, seq: number, spec: T) => void, what: string): { ok: number; unknown: number; failed: Array<{ index: number; errno: number }> } {
    const result = { ok: 0, unknown: 0, failed: [] as Array<{ index: number; errno: number }> };
    let i = 0;
    while (i < specs.length) {
      const w = new NetlinkWriter(Math.min(this.#chunk, 1 << 16));
      const bySeq = new Map<number, number>();
      while (i < specs.length) {
        const before = w.pos;
        const seq = this.#nextSeq();
        encode(w, seq, specs[i]);
        if (w.pos > this.#chunk && bySeq.size > 0) { w.pos = before; break; }
        bySeq.set(seq, i);
        i++;
      }
      this.#send(Buffer.from(w.bytes()), `send(${bySeq.size} x ${what})`);
      let pending = bySeq.size;
      while (pending > 0) {
        let msgs: NetlinkMessage[];
        try {
          msgs = this.#recv();
        } catch (err) {
          // ENOBUFS: acks were dropped; the requests themselves were processed. Their outcome is unknown.
          if (err instanceof ConntrackSocketError && err.errno === ENOBUFS) { result.unknown += pending; break; }
          throw err;
        }
        for (const m of msgs) {
          if (m.type !== NLMSG.ERROR) continue;
          const index = bySeq.get(m.seq);
          if (index === undefined) continue;
          bySeq.delete(m.seq);
          pending--;
          const e = parseError(m);
          if (e.error === 0) result.ok++;
          else result.failed.push({ index, errno: -e.error });
        }
      }
    }
    return result;
  }

  /** Closes the socket; further calls throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#libc.close(this.#fd);
  }
}
