/**
 * A packet tracer that executes the LOWERED expressions of a ruleset (what the kernel would run), for unit tests
 * without root (DESIGN.md §8). Pure.
 *
 * The VM follows nf_tables semantics (net/netfilter/nf_tables_core.c nft_do_chain and the expression evals):
 * 64 bytes of data registers (NFT_REG_1..4 = 16-byte views, NFT_REG32_00..15 = 4-byte views of the same bytes),
 * loads zero-pad to a 4-byte boundary, a failed cmp/lookup ends the rule (NFT_BREAK), a verdict ends the rule and
 * acts on the chain (jump/goto/return/accept/drop), nat and masq accept, reject drops.
 *
 * `numgen` is enumerated: every value is explored with probability 1/mod, and branches that reach the same state
 * at a rule boundary are merged, so a cascade of N endpoints costs O(N^2) steps, not N!.
 *
 * Hook walk (base chains of the ruleset, by priority; nat chains only when ct state is new, as the kernel consults
 * NAT only for the first packet of a connection):
 * - path 'prerouting': prerouting hook -> routing on the (possibly DNATed) destination: a local address (ctx.local
 *   addresses or loopback) goes to the input hook, anything else to forward and then postrouting;
 * - path 'output': output hook -> postrouting.
 */
import type { Expr, TableFamily, Verdict } from '../netlink/types.ts';
import { CT_KEY, CT_STATE_BIT, CT_STATUS_BIT, FAMILY_NUMBER, FIB_FLAG, LOOKUP_FLAG, META_KEY, NAT_TYPE, PAYLOAD_BASE, RTN } from '../netlink/types.ts';
import { formatAddr, isIPv4, isIPv6, isLoopback, parseAddr } from './addr.ts';
import { elementKeyBytes, endpointDataBytes, keyLen, lowerRule, regOffset } from './lower.ts';
import type { CtStateName, HookName, L4Proto, Ruleset } from './model.ts';
import { L4PROTO_NUMBER } from './model.ts';

/** The packet to trace. Addresses are of the ruleset's family. Ports are host-order numbers. */
export interface TracePacket {
  family: TableFamily;
  src: string;
  dst: string;
  proto: L4Proto;
  sport: number;
  dport: number;
  /** Input interface name (prerouting path); '' or undefined for locally generated packets. */
  iifname?: string;
  /** Where the packet enters: from an interface (prerouting) or from a local socket (output). */
  path: 'prerouting' | 'output';
}

/** The node and connection state the packet meets. */
export interface TraceContext {
  /** The node's local addresses (`fib ... type local`; routing to input), either family (the other family's are
   *  ignored). Loopback is always local. */
  localAddrs: readonly string[];
  /** `ct state` of the packet; default 'new'. */
  ctState?: CtStateName;
  /** Initial `meta mark` (u32); default 0. */
  mark?: number;
  /** Contents of dynamic (affinity) sets: set name -> addresses in it. */
  dynamicSets?: ReadonlyMap<string, readonly string[]>;
  /** Maximum jump depth (kernel: NFT_JUMP_STACK_SIZE 16). */
  maxDepth?: number;
}

export type TraceVerdict = 'accept' | 'drop' | 'reject';

/** One possible fate of the packet (numgen makes several). */
export interface TraceOutcome {
  /** Probability of this outcome (sums to 1 over all outcomes). */
  probability: number;
  verdict: TraceVerdict;
  dnat?: { ip: string; port: number };
  masquerade: boolean;
  /** Final meta mark. */
  mark: number;
  /** Where routing sent it: 'input' (local delivery), 'forward', or 'output' (locally generated). */
  route: 'input' | 'forward' | 'output';
  chainsVisited: string[];
  /** `update @set { ... }` executed: set name and key text. */
  updates: Array<{ set: string; key: string }>;
}

/** The trace of one packet. */
export interface TraceResult {
  /** The verdict of every outcome, or 'mixed' when numgen branches disagree. */
  verdict: TraceVerdict | 'mixed';
  /** Distinct DNAT targets with their total probability and whether that path was masqueraded. */
  dnatTargets: Array<{ ip: string; port: number; probability: number; masquerade: boolean }>;
  /** True when at least one outcome was masqueraded. */
  masquerade: boolean;
  /** Chains visited by any outcome, in first-visit order. */
  chainsVisited: string[];
  outcomes: TraceOutcome[];
}

interface Pkt {
  src: Uint8Array;
  dst: Uint8Array;
  proto: number;
  sport: number;
  dport: number;
  iifname: string;
}

interface Branch {
  prob: number;
  pkt: Pkt;
  mark: number;
  ctStatus: number;
  dnat?: { ip: string; port: number };
  masq: boolean;
  visited: string[];
  updates: Array<{ set: string; key: string }>;
}

type End = 'accept' | 'drop' | 'reject' | 'return';

const CT_STATE_VALUE: Record<CtStateName, number> = {
  invalid: CT_STATE_BIT.INVALID, established: CT_STATE_BIT.ESTABLISHED, related: CT_STATE_BIT.RELATED,
  new: CT_STATE_BIT.NEW, untracked: CT_STATE_BIT.UNTRACKED,
};

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function u32le(b: Uint8Array, off = 0): number {
  return (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24)) >>> 0;
}

function le32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0, true);
  return b;
}

function cloneBranch(b: Branch, prob: number): Branch {
  return { ...b, prob, pkt: { ...b.pkt }, visited: [...b.visited], updates: [...b.updates] };
}

function stateKey(b: Branch): string {
  return JSON.stringify([hex(b.pkt.dst), b.pkt.dport, b.mark, b.ctStatus, b.dnat ?? null, b.masq, b.visited, b.updates]);
}

function merge(bs: Branch[]): Branch[] {
  if (bs.length < 2) return bs;
  const m = new Map<string, Branch>();
  for (const b of bs) {
    const k = stateKey(b);
    const prev = m.get(k);
    if (prev) prev.prob += b.prob;
    else m.set(k, b);
  }
  return [...m.values()];
}

/**
 * Traces a packet through the ruleset's base chains.
 * @throws Error when the packet's family differs from the ruleset's, on unknown chains/sets, on opaque
 *   expressions, or when the jump depth exceeds ctx.maxDepth.
 */
export function trace(rs: Ruleset, packet: TracePacket, ctx: TraceContext): TraceResult {
  const family = rs.family;
  if (packet.family !== family) throw new Error(`trace: packet family ${packet.family} differs from table family ${family}`);
  const addrBytes = family === 'ip' ? 4 : 16;
  const local = ctx.localAddrs
    .filter((a, i) => {
      if (isIPv4(a)) return family === 'ip';
      if (isIPv6(a)) return family === 'ip6';
      throw new Error(`localAddrs[${i}]: ${JSON.stringify(a)} is not an IP address`);
    })
    .map((a) => hex(parseAddr(family, a, 'localAddrs')));
  const isLocal = (b: Uint8Array) => isLoopback(b) || local.includes(hex(b));
  const ctState = CT_STATE_VALUE[ctx.ctState ?? 'new'];
  const isNew = (ctx.ctState ?? 'new') === 'new';
  const maxDepth = ctx.maxDepth ?? 16;

  // Lowered rules per chain and element lookup tables per set, built on first use.
  const lowered = new Map<string, Expr[][]>();
  const rulesOf = (chain: string): Expr[][] => {
    let r = lowered.get(chain);
    if (!r) {
      const c = rs.index.chains.get(chain);
      if (!c) throw new Error(`trace: unknown chain ${JSON.stringify(chain)}`);
      r = c.chain.rules.map((x) => lowerRule(family, x));
      lowered.set(chain, r);
    }
    return r;
  };
  const tables = new Map<string, { keyLen: number; elems: Map<string, Verdict | Uint8Array | true> }>();
  const tableOf = (set: string) => {
    let t = tables.get(set);
    if (!t) {
      const def = rs.index.sets.get(set);
      if (!def) throw new Error(`trace: unknown set ${JSON.stringify(set)}`);
      const elems = new Map<string, Verdict | Uint8Array | true>();
      for (const x of rs.index.elements.get(set)?.values() ?? []) {
        const el = x.element;
        elems.set(hex(elementKeyBytes(family, el.key)), el.verdict ?? (el.endpoint ? endpointDataBytes(family, el.endpoint) : true));
      }
      for (const ip of ctx.dynamicSets?.get(set) ?? []) elems.set(hex(parseAddr(family, ip, `dynamicSets ${set}`)), true);
      t = { keyLen: keyLen(def.set.key), elems };
      tables.set(set, t);
    }
    return t;
  };

  const netHeader = (p: Pkt): Uint8Array => {
    if (family === 'ip') {
      const h = new Uint8Array(20);
      h[0] = 0x45; h[8] = 64; h[9] = p.proto;
      h.set(p.src, 12); h.set(p.dst, 16);
      return h;
    }
    const h = new Uint8Array(40);
    h[0] = 0x60; h[6] = p.proto; h[7] = 64;
    h.set(p.src, 8); h.set(p.dst, 24);
    return h;
  };
  const thHeader = (p: Pkt): Uint8Array => {
    const h = new Uint8Array(8);
    h[0] = p.sport >> 8; h[1] = p.sport & 0xff; h[2] = p.dport >> 8; h[3] = p.dport & 0xff;
    return h;
  };

  /** Executes one rule for one branch; returns (branch, verdict-or-null) pairs (null: go on with the next rule). */
  function execRule(exprs: Expr[], b0: Branch): Array<{ b: Branch; v: Verdict | 'reject' | null }> {
    const out: Array<{ b: Branch; v: Verdict | 'reject' | null }> = [];
    const run = (i: number, b: Branch, regs: Uint8Array): void => {
      const write = (reg: number, data: Uint8Array) => {
        const off = regOffset(reg);
        const padded = Math.ceil(data.length / 4) * 4;
        if (off + padded > 64) throw new Error(`trace: register ${reg} overflow`);
        regs.fill(0, off, off + padded);
        regs.set(data, off);
      };
      const read = (reg: number, len: number) => regs.slice(regOffset(reg), regOffset(reg) + len);
      for (; i < exprs.length; i++) {
        const e = exprs[i];
        switch (e.type) {
          case 'payload': {
            const src = e.base === PAYLOAD_BASE.NETWORK ? netHeader(b.pkt) : e.base === PAYLOAD_BASE.TRANSPORT ? thHeader(b.pkt) : null;
            if (!src || e.offset + e.len > src.length) throw new Error(`trace: payload base ${e.base} offset ${e.offset} len ${e.len} is outside the synthesized headers`);
            write(e.dreg, src.slice(e.offset, e.offset + e.len));
            break;
          }
          case 'meta': {
            if (e.key === META_KEY.L4PROTO) write(e.dreg, new Uint8Array([b.pkt.proto]));
            else if (e.key === META_KEY.NFPROTO) write(e.dreg, new Uint8Array([FAMILY_NUMBER[family]]));
            else if (e.key === META_KEY.MARK) write(e.dreg, le32(b.mark));
            else if (e.key === META_KEY.IIFNAME) {
              const n = new Uint8Array(16);
              n.set(new TextEncoder().encode(b.pkt.iifname).slice(0, 15));
              write(e.dreg, n);
            } else throw new Error(`trace: meta key ${e.key} is not supported`);
            break;
          }
          case 'meta_set':
            if (e.key !== META_KEY.MARK) throw new Error(`trace: meta set key ${e.key} is not supported`);
            b.mark = u32le(read(e.sreg, 4));
            break;
          case 'ct':
            if (e.key === CT_KEY.STATE) write(e.dreg, le32(ctState));
            else if (e.key === CT_KEY.STATUS) write(e.dreg, le32(b.ctStatus));
            else throw new Error(`trace: ct key ${e.key} is not supported`);
            break;
          case 'fib': {
            const addr = e.flags & FIB_FLAG.SADDR ? b.pkt.src : b.pkt.dst;
            write(e.dreg, le32(isLocal(addr) ? RTN.LOCAL : RTN.UNICAST));
            break;
          }
          case 'cmp': {
            const v = read(e.sreg, e.data.length);
            const c = Buffer.compare(Buffer.from(v), Buffer.from(e.data));
            const ok = [c === 0, c !== 0, c < 0, c <= 0, c > 0, c >= 0][e.op];
            if (!ok) { out.push({ b, v: { kind: 'break' } }); return; }
            break;
          }
          case 'range': {
            const v = Buffer.from(read(e.sreg, e.from.length));
            const inside = Buffer.compare(v, Buffer.from(e.from)) >= 0 && Buffer.compare(v, Buffer.from(e.to)) <= 0;
            if (inside !== (e.op === 0)) { out.push({ b, v: { kind: 'break' } }); return; }
            break;
          }
          case 'bitwise': {
            const v = read(e.sreg, e.len);
            const r = new Uint8Array(e.len);
            for (let k = 0; k < e.len; k++) r[k] = (v[k] & e.mask[k]) ^ e.xor[k];
            write(e.dreg, r);
            break;
          }
          case 'lookup': {
            const t = tableOf(e.set);
            const hit = t.elems.get(hex(read(e.sreg, t.keyLen)));
            if (e.dreg === 0) {
              if (hit === undefined || hit === true || hit instanceof Uint8Array) { out.push({ b, v: { kind: 'break' } }); return; }
              out.push({ b, v: hit });
              return;
            }
            if (e.dreg !== undefined) {
              // A data map: a miss ends the rule; a hit loads the element's value into dreg.
              if (!(hit instanceof Uint8Array)) { out.push({ b, v: { kind: 'break' } }); return; }
              write(e.dreg, hit);
              break;
            }
            const found = hit !== undefined;
            if (found === !!((e.flags ?? 0) & LOOKUP_FLAG.INV)) { out.push({ b, v: { kind: 'break' } }); return; }
            break;
          }
          case 'immediate':
            if ('verdict' in e.data) { out.push({ b, v: e.data.verdict }); return; }
            write(e.dreg, e.data.value);
            break;
          case 'numgen': {
            for (let v = 0; v < e.modulus; v++) {
              const nb = cloneBranch(b, b.prob / e.modulus);
              const nr = regs.slice();
              const off = regOffset(e.dreg);
              nr.set(le32(v + (e.offset ?? 0)), off);
              run(i + 1, nb, nr);
            }
            return;
          }
          case 'nat': {
            if (e.natType !== NAT_TYPE.DNAT) throw new Error('trace: only dnat is supported');
            if (e.regAddrMin === undefined) throw new Error('trace: dnat without an address register');
            const ip = read(e.regAddrMin, addrBytes);
            const port = e.regProtoMin !== undefined ? (read(e.regProtoMin, 2)[0] << 8) | read(e.regProtoMin, 2)[1] : b.pkt.dport;
            b.dnat = { ip: formatAddr(ip), port };
            b.pkt.dst = ip;
            b.pkt.dport = port;
            b.ctStatus |= CT_STATUS_BIT.DST_NAT;
            out.push({ b, v: { kind: 'accept' } });
            return;
          }
          case 'masq':
            b.masq = true;
            b.ctStatus |= CT_STATUS_BIT.SRC_NAT;
            out.push({ b, v: { kind: 'accept' } });
            return;
          case 'reject':
            out.push({ b, v: 'reject' });
            return;
          case 'counter':
            break;
          case 'dynset': {
            const key = read(e.sregKey, tableOf(e.set).keyLen);
            b.updates.push({ set: e.set, key: key.length === 4 || key.length === 16 ? formatAddr(key) : hex(key) });
            break;
          }
          default:
            throw new Error(`trace: expression ${e.type} is not supported`);
        }
      }
      out.push({ b, v: null });
    };
    run(0, b0, new Uint8Array(64));
    return out;
  }

  function runChain(name: string, input: Branch[], depth: number): Array<{ b: Branch; end: End }> {
    if (depth > maxDepth) throw new Error(`trace: jump depth exceeds ${maxDepth} at chain ${name}`);
    const rules = rulesOf(name);
    const results: Array<{ b: Branch; end: End }> = [];
    let active = input.map((b) => {
      if (!b.visited.includes(name)) b.visited.push(name);
      return b;
    });
    for (const exprs of rules) {
      if (active.length === 0) break;
      const next: Branch[] = [];
      for (const b of active) {
        for (const { b: nb, v } of execRule(exprs, b)) {
          if (v === null || (v !== 'reject' && (v.kind === 'break' || v.kind === 'continue'))) { next.push(nb); continue; }
          if (v === 'reject') { results.push({ b: nb, end: 'reject' }); continue; }
          switch (v.kind) {
            case 'accept': case 'drop': case 'return':
              results.push({ b: nb, end: v.kind });
              break;
            case 'jump':
              for (const r of runChain(v.chain, [nb], depth + 1)) {
                if (r.end === 'return') next.push(r.b);
                else results.push(r);
              }
              break;
            case 'goto':
              for (const r of runChain(v.chain, [nb], depth + 1)) results.push(r);
              break;
          }
        }
      }
      active = merge(next);
    }
    for (const b of active) results.push({ b, end: 'return' });
    return results;
  }

  const baseChains = (hook: HookName) =>
    [...rs.index.chains.values()]
      .map((x) => x.chain)
      .filter((c) => c.hook?.hook === hook && (c.hook.type !== 'nat' || isNew))
      .sort((a, b) => a.hook!.priority - b.hook!.priority);

  /** Runs a hook's base chains in priority order; returns surviving branches and finished outcomes. */
  const runHook = (hook: HookName, input: Branch[], done: Array<{ b: Branch; end: TraceVerdict; route: TraceOutcome['route'] }>, route: TraceOutcome['route']): Branch[] => {
    let active = input;
    for (const c of baseChains(hook)) {
      const next: Branch[] = [];
      for (const r of runChain(c.name, active, 0)) {
        if (r.end === 'accept' || r.end === 'return') next.push(r.b);
        else done.push({ b: r.b, end: r.end, route });
      }
      active = merge(next);
    }
    return active;
  };

  const start: Branch = {
    prob: 1,
    pkt: {
      src: parseAddr(family, packet.src, 'packet.src'),
      dst: parseAddr(family, packet.dst, 'packet.dst'),
      proto: L4PROTO_NUMBER[packet.proto],
      sport: packet.sport,
      dport: packet.dport,
      iifname: packet.path === 'output' ? '' : packet.iifname ?? '',
    },
    mark: (ctx.mark ?? 0) >>> 0,
    ctStatus: 0,
    masq: false,
    visited: [],
    updates: [],
  };

  const done: Array<{ b: Branch; end: TraceVerdict; route: TraceOutcome['route'] }> = [];
  if (packet.path === 'output') {
    const after = runHook('output', [start], done, 'output');
    for (const b of runHook('postrouting', after, done, 'output')) done.push({ b, end: 'accept', route: 'output' });
  } else {
    const after = runHook('prerouting', [start], done, 'forward');
    const toInput = after.filter((b) => isLocal(b.pkt.dst));
    const toForward = after.filter((b) => !isLocal(b.pkt.dst));
    for (const b of runHook('input', toInput, done, 'input')) done.push({ b, end: 'accept', route: 'input' });
    const fwd = runHook('forward', toForward, done, 'forward');
    for (const b of runHook('postrouting', fwd, done, 'forward')) done.push({ b, end: 'accept', route: 'forward' });
  }
  // Outcomes finished in prerouting are labelled by where they would have gone.
  for (const d of done) if (d.route === 'forward' && packet.path === 'prerouting' && isLocal(d.b.pkt.dst)) d.route = 'input';

  const outcomes: TraceOutcome[] = done.map(({ b, end, route }) => ({
    probability: b.prob,
    verdict: end,
    ...(b.dnat ? { dnat: b.dnat } : {}),
    masquerade: b.masq,
    mark: b.mark,
    route,
    chainsVisited: b.visited,
    updates: b.updates,
  }));
  const verdicts = new Set(outcomes.map((o) => o.verdict));
  const targets = new Map<string, { ip: string; port: number; probability: number; masquerade: boolean }>();
  for (const o of outcomes) {
    if (!o.dnat) continue;
    const k = `${o.dnat.ip}|${o.dnat.port}`;
    const t = targets.get(k);
    if (t) { t.probability += o.probability; t.masquerade ||= o.masquerade; }
    else targets.set(k, { ...o.dnat, probability: o.probability, masquerade: o.masquerade });
  }
  const visited: string[] = [];
  for (const o of outcomes) for (const c of o.chainsVisited) if (!visited.includes(c)) visited.push(c);
  return {
    verdict: verdicts.size === 1 ? [...verdicts][0] : 'mixed',
    dnatTargets: [...targets.values()],
    masquerade: outcomes.some((o) => o.masquerade),
    chainsVisited: visited,
    outcomes,
  };
}
