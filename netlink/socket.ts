/**
 * The nf_tables NETLINK_NETFILTER socket: batches, dumps, the generation id and notification groups, over the libc
 * calls of netlink/libc.ts (which also holds the socket constants and their uapi sources).
 *
 * The kernel processes a batch synchronously inside send(): when it returns, every reply is queued on the socket
 * (reference nftables-netlink.md §1.2), so a batch is: send, then read replies until the completion condition.
 */
import { AF_NETLINK, SOCK_RAW, SOCK_CLOEXEC, NETLINK_NETFILTER, SOL_SOCKET, SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NETLINK_DROP_MEMBERSHIP, NETLINK_NO_ENOBUFS, NETLINK_CAP_ACK, NETLINK_EXT_ACK, MSG_DONTWAIT, POLLIN, EAGAIN, EINTR, loadLibc, type Libc } from './libc.ts';
import type { BatchOp, ChainSpec, ElementsSpec, RuleSpec, SetSpec, TableFamily, TableSpec } from './types.ts';
import { FAMILY_NUMBER, NFPROTO } from './types.ts';
import { NetlinkWriter, attrMap, read } from './attrs.ts';
import { describeOp, encodeBatch, type EncodedBatch } from './batch.ts';
import { NFTA_GEN, NFT_MSG, NLMSG, NLM_F, beginMessage, endMessage, errnoName, errnoText, nftType, parseError, parseMessages, type NetlinkMessage } from './message.ts';
import { NFTA_CHAIN, NFTA_RULE, NFTA_SET, NFTA_SET_ELEM_LIST, NFTA_TABLE, decodeChain, decodeElements, decodeRule, decodeSet, decodeTable, tableFamilyOf } from './objects.ts';

/** What a successful batch cost. */
export interface BatchResult {
  bytes: number;
  messages: number;
  /** Wall time of the send() call, during which the kernel validated and committed the batch (ms). */
  kernelMs: number;
}

/** One failing message of a batch, mapped back to its operation. */
export interface BatchFailure {
  /** Index of the operation in the batch, null for batch-level errors (e.g. a stale generation id). */
  opIndex: number | null;
  op: BatchOp | null;
  seq: number;
  /** Positive errno. */
  errno: number;
  errnoName: string;
  extAckMessage?: string;
  attrOffset?: number;
}

/** The kernel rejected a batch: nothing of it was committed. */
export class BatchError extends Error {
  readonly errors: BatchFailure[];
  constructor(errors: BatchFailure[]) {
    const first = errors[0];
    const what = first.op ? describeOp(first.op) : 'batch';
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more error${errors.length > 2 ? 's' : ''})` : '';
    super(`nf_tables rejected the batch: ${what}: ${errnoText(first.errno)}${first.extAckMessage ? `: ${first.extAckMessage}` : ''}${more}`);
    this.name = 'BatchError';
    this.errors = errors;
  }
}

/** An error of a socket system call, with its errno. */
export class NetlinkSocketError extends Error {
  readonly errno: number;
  constructor(what: string, errno: number, hint = '') {
    super(`${what}: ${errnoText(errno)}${hint ? `; ${hint}` : ''}`);
    this.name = 'NetlinkSocketError';
    this.errno = errno;
  }
}

/** Options of {@link NftSocket.open}; buffer sizes in bytes (the kernel doubles them). */
export interface NftSocketOptions {
  sndbufBytes?: number;
  rcvbufBytes?: number;
  /** Subscribe to multicast groups (e.g. NFNLGRP_NFTABLES = 7 for ruleset notifications). */
  groups?: number[];
  /** Batches larger than this are sent on a worker thread so the event loop stays responsive (default 1 MiB). */
  asyncThresholdBytes?: number;
}

/**
 * A NETLINK_NETFILTER socket for nf_tables batches and dumps. Operations are serialised: one at a time.
 */
export class NftSocket {
  readonly #libc: Libc;
  readonly #fd: number;
  readonly #rbuf = Buffer.alloc(1 << 20);
  readonly #asyncThreshold: number;
  #sndbuf: number;
  #seq: number;
  #closed = false;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(libc: Libc, fd: number, sndbuf: number, asyncThreshold: number) {
    this.#libc = libc;
    this.#fd = fd;
    this.#sndbuf = sndbuf;
    this.#asyncThreshold = asyncThreshold;
    this.#seq = (Date.now() & 0x3fffffff) >>> 0;
  }

  /**
   * Opens and configures the socket: SO_SNDBUFFORCE/SO_RCVBUFFORCE (falling back to SO_SNDBUF/SO_RCVBUF without
   * CAP_NET_ADMIN), NETLINK_EXT_ACK and NETLINK_CAP_ACK.
   * @throws NetlinkSocketError naming the call and errno (e.g. EPROTONOSUPPORT without nfnetlink, EPERM).
   */
  static open(opts: NftSocketOptions = {}): NftSocket {
    const libc = loadLibc();
    const fd = libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) throw new NetlinkSocketError('socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)', libc.errno(), 'is the nfnetlink module available?');
    const sock = new NftSocket(libc, fd, 0, opts.asyncThresholdBytes ?? 1 << 20);
    try {
      const addr = Buffer.alloc(12);
      addr.writeUInt16LE(AF_NETLINK, 0);
      if (libc.bind(fd, addr, 12) < 0) throw new NetlinkSocketError('bind(AF_NETLINK)', libc.errno());
      sock.#setBuf(SO_SNDBUFFORCE, SO_SNDBUF, opts.sndbufBytes ?? 4 << 20);
      sock.#setBuf(SO_RCVBUFFORCE, SO_RCVBUF, opts.rcvbufBytes ?? 8 << 20);
      sock.#sndbuf = sock.#getInt(SOL_SOCKET, SO_SNDBUF);
      sock.#setInt(SOL_NETLINK, NETLINK_EXT_ACK, 1, 'NETLINK_EXT_ACK');
      sock.#setInt(SOL_NETLINK, NETLINK_CAP_ACK, 1, 'NETLINK_CAP_ACK');
      if (opts.groups?.length) {
        sock.#setInt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1, 'NETLINK_NO_ENOBUFS');
        for (const g of opts.groups) sock.#setInt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, g, `NETLINK_ADD_MEMBERSHIP ${g}`);
      }
    } catch (err) {
      libc.close(fd);
      throw err;
    }
    return sock;
  }

  /**
   * The socket's netlink port id (sockaddr_nl.nl_pid from getsockname(), assigned by the kernel at bind()). The
   * kernel stamps it into nlmsg_pid of every nf_tables notification caused by this socket's batches, which is how a
   * listener tells our own transactions from others' (net/netfilter/nf_tables_api.c nft_notify: ctx->portid).
   * @throws NetlinkSocketError when getsockname() fails.
   */
  get portId(): number {
    this.#assertOpen();
    const addr = Buffer.alloc(12);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(12, 0);
    if (this.#libc.getsockname(this.#fd, addr, len) < 0) throw new NetlinkSocketError('getsockname(AF_NETLINK)', this.#libc.errno());
    return addr.readUInt32LE(4);
  }

  /**
   * Joins or leaves a multicast group (NETLINK_ADD_MEMBERSHIP / NETLINK_DROP_MEMBERSHIP, linux/netlink.h).
   * Messages already queued stay readable after leaving.
   * @throws NetlinkSocketError when setsockopt() fails.
   */
  setMembership(group: number, member: boolean): void {
    this.#assertOpen();
    this.#setInt(SOL_NETLINK, member ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP, group, `${member ? 'NETLINK_ADD_MEMBERSHIP' : 'NETLINK_DROP_MEMBERSHIP'} ${group}`);
  }

  /** The socket's send buffer as the kernel reports it (bytes, already doubled). */
  get sendBufferBytes(): number { return this.#sndbuf; }

  #setInt(level: number, name: number, value: number, what: string): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value, 0);
    if (this.#libc.setsockopt(this.#fd, level, name, b, 4) < 0) throw new NetlinkSocketError(`setsockopt(${what})`, this.#libc.errno());
  }

  #getInt(level: number, name: number): number {
    const b = Buffer.alloc(4);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(4, 0);
    if (this.#libc.getsockopt(this.#fd, level, name, b, len) < 0) throw new NetlinkSocketError('getsockopt', this.#libc.errno());
    return b.readInt32LE(0);
  }

  #setBuf(force: number, plain: number, bytes: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(Math.min(bytes, 0x3fffffff), 0);
    if (this.#libc.setsockopt(this.#fd, SOL_SOCKET, force, b, 4) === 0) return;
    // Without CAP_NET_ADMIN, the FORCE variants fail with EPERM: fall back to the capped option.
    if (this.#libc.setsockopt(this.#fd, SOL_SOCKET, plain, b, 4) < 0) throw new NetlinkSocketError('setsockopt(SO_SNDBUF/SO_RCVBUF)', this.#libc.errno());
  }

  #nextSeq(n: number): number {
    const s = this.#seq;
    this.#seq = (this.#seq + n + 1) >>> 0;
    return s;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * Sends `ops` as one batch and waits for the kernel's verdict.
   * @returns bytes, messages and the kernel time.
   * @throws BatchError when any message failed (nothing was committed); NetlinkSocketError when send() failed
   *   (EMSGSIZE: the batch exceeds the send buffer even after raising it).
   */
  sendBatch(ops: readonly BatchOp[], opts: { genId?: number } = {}): Promise<BatchResult> {
    return this.#serial(async () => {
      const batch = encodeBatch(ops, { seqStart: this.#nextSeq(ops.length * 2 + 2), genId: opts.genId });
      const kernelMs = await this.sendEncoded(batch);
      this.#collect(batch, ops);
      return { bytes: batch.bytes, messages: batch.messages, kernelMs };
    });
  }

  /**
   * Sends an already encoded batch (its seqs must be unique on this socket) and returns the send() time in ms.
   * Raises the send buffer with SO_SNDBUFFORCE first when the batch does not fit. Replies are left queued.
   * @throws NetlinkSocketError when send() fails.
   */
  async sendEncoded(batch: EncodedBatch): Promise<number> {
    this.#assertOpen();
    if (batch.bytes > this.#sndbuf - 32) {
      this.#setBuf(SO_SNDBUFFORCE, SO_SNDBUF, batch.bytes + (64 << 10));
      this.#sndbuf = this.#getInt(SOL_SOCKET, SO_SNDBUF);
    }
    const t0 = performance.now();
    let n: number;
    if (batch.bytes >= this.#asyncThreshold) {
      n = await new Promise<number>((resolve, reject) =>
        this.#libc.send.async(this.#fd, batch.buffer, batch.bytes, 0, (err, res) => (err ? reject(err) : resolve(Number(res)))));
      if (n < 0) {
        // errno belongs to the worker thread; retry the size check synchronously to name the failure.
        throw new NetlinkSocketError(`send(${batch.bytes} bytes)`, batch.bytes > this.#sndbuf - 32 ? 90 : 105,
          `the batch could not be queued (send buffer ${this.#sndbuf} bytes)`);
      }
    } else {
      n = Number(this.#libc.send(this.#fd, batch.buffer, batch.bytes, 0));
      if (n < 0) {
        const errno = this.#libc.errno();
        throw new NetlinkSocketError(`send(${batch.bytes} bytes)`, errno, errno === 90 ? `the batch exceeds the socket send buffer (${this.#sndbuf} bytes)` : '');
      }
    }
    return performance.now() - t0;
  }

  /** Reads replies of `batch` until it is complete; throws BatchError when any reply carries an error. */
  #collect(batch: EncodedBatch, ops: readonly BatchOp[]): void {
    const failures: BatchFailure[] = [];
    let done = batch.messages === 0;
    const deadline = Date.now() + 30_000;
    while (!done) {
      const msgs = this.#recvMessages(deadline);
      for (const m of msgs) {
        if (m.type !== NLMSG.ERROR) continue;
        const e = parseError(m);
        if (e.seq < batch.beginSeq || e.seq > batch.endSeq) continue; // a stale reply of an earlier operation
        if (e.error !== 0) {
          const opIndex = e.seq === batch.beginSeq ? null : batch.opIndexBySeq.get(e.seq) ?? null;
          const f: BatchFailure = { opIndex, op: opIndex === null ? null : ops[opIndex], seq: e.seq, errno: -e.error, errnoName: errnoName(e.error) };
          if (e.extAckMessage) f.extAckMessage = e.extAckMessage;
          if (e.attrOffset !== undefined) f.attrOffset = e.attrOffset;
          failures.push(f);
        }
        if (e.seq === batch.lastSeq || (e.seq === batch.beginSeq && e.error !== 0)) done = true;
      }
    }
    if (failures.length) throw new BatchError(failures);
  }

  /** Receives one datagram (waiting up to the deadline) and parses it. */
  #recvMessages(deadline: number): NetlinkMessage[] {
    const pfd = Buffer.alloc(8);
    for (;;) {
      const n = Number(this.#libc.recv(this.#fd, this.#rbuf, this.#rbuf.length, MSG_DONTWAIT));
      if (n > 0) return parseMessages(Buffer.from(this.#rbuf.subarray(0, n)));
      const errno = n < 0 ? this.#libc.errno() : 0;
      if (n === 0 || (errno !== EAGAIN && errno !== EINTR)) throw new NetlinkSocketError('recv', errno || 5);
      const left = deadline - Date.now();
      if (left <= 0) throw new NetlinkSocketError('recv: no reply from the kernel in time', 110);
      pfd.writeInt32LE(this.#fd, 0);
      pfd.writeInt16LE(POLLIN, 4);
      this.#libc.poll(pfd, 1, Math.min(left, 1000));
    }
  }

  /** Reads whatever is queued without waiting (notifications); [] when nothing is there. */
  drain(): NetlinkMessage[] {
    this.#assertOpen();
    const out: NetlinkMessage[] = [];
    for (;;) {
      const n = Number(this.#libc.recv(this.#fd, this.#rbuf, this.#rbuf.length, MSG_DONTWAIT));
      if (n <= 0) return out;
      out.push(...parseMessages(Buffer.from(this.#rbuf.subarray(0, n))));
    }
  }

  /** Waits up to `timeoutMs` for the socket to become readable (for notification loops). */
  waitReadable(timeoutMs: number): boolean {
    const pfd = Buffer.alloc(8);
    pfd.writeInt32LE(this.#fd, 0);
    pfd.writeInt16LE(POLLIN, 4);
    return this.#libc.poll(pfd, 1, timeoutMs) > 0;
  }

  /** The current ruleset generation id (NFT_MSG_GETGEN → NEWGEN NFTA_GEN_ID). */
  getGeneration(): Promise<number> {
    return this.#serial(async () => {
      const msgs = this.#request(NFT_MSG.GETGEN, 0, NFPROTO.UNSPEC, () => {});
      const gen = msgs.find((m) => m.type === nftType(NFT_MSG.NEWGEN));
      if (!gen) throw new Error('GETGEN: no NEWGEN reply');
      return read.u32be(attrMap(gen.payload).get(NFTA_GEN.ID)!);
    });
  }

  /** Every table of `family` (all families when omitted). */
  listTables(family?: TableFamily): Promise<TableSpec[]> {
    return this.#dump(NFT_MSG.GETTABLE, family, () => {}, (f, m) => decodeTable(f, m.payload));
  }

  /** Chains of a table. */
  listChains(family: TableFamily, table: string): Promise<ChainSpec[]> {
    return this.#dump(NFT_MSG.GETCHAIN, family, (w) => w.attrStr(NFTA_CHAIN.TABLE, table), (f, m) => decodeChain(f, m.payload))
      .then((cs) => cs.filter((c) => c.table === table));
  }

  /** Rules of a table, or of one chain. */
  listRules(family: TableFamily, table: string, chain?: string): Promise<RuleSpec[]> {
    return this.#dump(NFT_MSG.GETRULE, family, (w) => { w.attrStr(NFTA_RULE.TABLE, table); if (chain) w.attrStr(NFTA_RULE.CHAIN, chain); }, (f, m) => decodeRule(f, m.payload))
      .then((rs) => rs.filter((r) => r.table === table && (!chain || r.chain === chain)));
  }

  /** Sets and maps of a table. */
  listSets(family: TableFamily, table: string): Promise<SetSpec[]> {
    return this.#dump(NFT_MSG.GETSET, family, (w) => w.attrStr(NFTA_SET.TABLE, table), (f, m) => decodeSet(f, m.payload))
      .then((ss) => ss.filter((s) => s.table === table));
  }

  /** Elements of one set (all dump messages merged). */
  listElements(family: TableFamily, table: string, set: string): Promise<ElementsSpec> {
    return this.#dump(NFT_MSG.GETSETELEM, family, (w) => { w.attrStr(NFTA_SET_ELEM_LIST.TABLE, table); w.attrStr(NFTA_SET_ELEM_LIST.SET, set); }, (f, m) => decodeElements(f, m.payload))
      .then((parts) => ({ family, table, set, elements: parts.flatMap((p) => p.elements) }));
  }

  /** A dump request, restarted when the kernel flags NLM_F_DUMP_INTR. */
  #dump<T>(msg: number, family: TableFamily | undefined, attrs: (w: NetlinkWriter) => void, decode: (f: TableFamily, m: NetlinkMessage) => T): Promise<T[]> {
    return this.#serial(async () => {
      for (let attempt = 0; attempt < 10; attempt++) {
        const msgs = this.#request(msg, NLM_F.DUMP, family ? FAMILY_NUMBER[family] : NFPROTO.UNSPEC, attrs);
        if (msgs.some((m) => m.flags & NLM_F.DUMP_INTR)) continue;
        const out: T[] = [];
        for (const m of msgs) {
          if (m.type !== nftType(msg - 1)) continue; // replies of GETX are NEWX (GETX - 1)
          const f = tableFamilyOf(m.family);
          if (f && (!family || f === family)) out.push(decode(f, m));
        }
        return out;
      }
      throw new Error(`nf_tables dump ${msg} was interrupted 10 times in a row (the ruleset keeps changing)`);
    });
  }

  /** Sends one request and reads replies until NLMSG_DONE, an error, or the ACK. */
  #request(msg: number, flags: number, family: number, attrs: (w: NetlinkWriter) => void): NetlinkMessage[] {
    this.#assertOpen();
    const w = new NetlinkWriter(256);
    const seq = this.#nextSeq(1);
    const s = beginMessage(w, nftType(msg), NLM_F.REQUEST | flags | (flags & NLM_F.DUMP ? 0 : NLM_F.ACK), seq, family);
    attrs(w);
    endMessage(w, s);
    const buf = w.bytes();
    if (Number(this.#libc.send(this.#fd, buf, buf.length, 0)) < 0) throw new NetlinkSocketError('send(request)', this.#libc.errno());
    const out: NetlinkMessage[] = [];
    const deadline = Date.now() + 30_000;
    for (;;) {
      for (const m of this.#recvMessages(deadline)) {
        if (m.seq !== seq) continue;
        if (m.type === NLMSG.DONE) return out;
        if (m.type === NLMSG.ERROR) {
          const e = parseError(m);
          if (e.error !== 0) throw new NetlinkSocketError(`nf_tables request ${msg}`, -e.error, e.extAckMessage ?? '');
          return out;
        }
        out.push(m);
        if (!(m.flags & NLM_F.MULTI) && !(flags & NLM_F.DUMP)) return out;
      }
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('NftSocket is closed');
  }

  /** Closes the socket. Further calls throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#libc.close(this.#fd);
  }
}
