/**
 * Batches: BATCH_BEGIN, one or more nf_tables messages per operation, BATCH_END, in ONE buffer that is sent with
 * ONE sendmsg, so the kernel commits all of it or none of it (reference nftables-netlink.md §1.2).
 *
 * Flags per operation follow nft (§1.3). NLM_F_ACK is set only on the last message (§1.7): failing messages are
 * reported whatever their flags, and the reply to the last message's seq (or an error on the BATCH_BEGIN seq)
 * completes the batch.
 */
import type { BatchOp } from './types.ts';
import { FAMILY_NUMBER, NFPROTO } from './types.ts';
import { NetlinkWriter } from './attrs.ts';
import { NFNL_BATCH_GENID, NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFNL_SUBSYS, NFT_MSG, NLM_F, beginMessage, endMessage, nftType } from './message.ts';
import { MAX_ELEMENTS_BYTES, NFTA_SET_ELEM_LIST, encodeChain, encodeChainFlush, encodeElement, encodeElements, encodeRule, encodeSet, encodeTable } from './objects.ts';

/** An encoded batch: the bytes to send and the map from message seq back to the operation. */
export interface EncodedBatch {
  buffer: Buffer;
  beginSeq: number;
  endSeq: number;
  /** Seq of the last nf_tables message (the one with NLM_F_ACK); equals beginSeq when there is none. */
  lastSeq: number;
  /** opIndexBySeq.get(seq) = index in `ops` of the operation that message belongs to. */
  opIndexBySeq: Map<number, number>;
  /** Byte offset of each message in `buffer`, by seq (to interpret extended-ACK attribute offsets). */
  offsetBySeq: Map<number, number>;
  bytes: number;
  /** nf_tables messages, BEGIN and END not counted. */
  messages: number;
}

const MSG = {
  table: { add: NFT_MSG.NEWTABLE, create: NFT_MSG.NEWTABLE, delete: NFT_MSG.DELTABLE, destroy: NFT_MSG.DESTROYTABLE },
  chain: { add: NFT_MSG.NEWCHAIN, create: NFT_MSG.NEWCHAIN, delete: NFT_MSG.DELCHAIN, destroy: NFT_MSG.DESTROYCHAIN, flush: NFT_MSG.DELRULE },
  rule: { add: NFT_MSG.NEWRULE, insert: NFT_MSG.NEWRULE, replace: NFT_MSG.NEWRULE, delete: NFT_MSG.DELRULE, destroy: NFT_MSG.DESTROYRULE },
  set: { add: NFT_MSG.NEWSET, create: NFT_MSG.NEWSET, delete: NFT_MSG.DELSET, destroy: NFT_MSG.DESTROYSET, flush: NFT_MSG.DELSETELEM },
  elements: { add: NFT_MSG.NEWSETELEM, create: NFT_MSG.NEWSETELEM, delete: NFT_MSG.DELSETELEM, destroy: NFT_MSG.DESTROYSETELEM },
} as const;

/** nlmsg_flags (besides NLM_F_REQUEST) for an operation, as nft sends them. */
export function opFlags(op: BatchOp): number {
  switch (op.op) {
    case 'add':
      if (op.kind === 'table') return 0;
      if (op.kind === 'rule') return NLM_F.CREATE | NLM_F.APPEND;
      return NLM_F.CREATE;
    case 'create': return op.kind === 'table' ? NLM_F.EXCL : NLM_F.CREATE | NLM_F.EXCL;
    case 'insert': return NLM_F.CREATE;
    case 'replace': return NLM_F.REPLACE;
    default: return 0;
  }
}

/** `add rule ip nftproxy services` — the operation in nft's words, for error messages and logs. */
export function describeOp(op: BatchOp): string {
  switch (op.kind) {
    case 'table': return `${op.op} table ${op.table.family} ${op.table.name}`;
    case 'chain': return `${op.op} chain ${op.chain.family} ${op.chain.table} ${op.chain.name}`;
    case 'rule': return `${op.op} rule ${op.rule.family} ${op.rule.table} ${op.rule.chain}${op.rule.comment ? ` (comment ${JSON.stringify(op.rule.comment)})` : ''}`;
    case 'set': return `${op.op} set ${op.set.family} ${op.set.table} ${op.set.name}`;
    case 'elements': return `${op.op} element ${op.elements.family} ${op.elements.table} ${op.elements.set} (${op.elements.elements.length} elements)`;
  }
}

/**
 * Encodes `ops` as one batch. Seqs are `seqStart` (BEGIN), then one per message, then END.
 * `genId` (optional) puts NFNL_BATCH_GENID in BEGIN: the kernel then rejects the batch with ERESTART when the
 * ruleset generation moved on.
 * @throws RangeError when one rule or element is larger than a netlink attribute can hold (64 KiB).
 */
export function encodeBatch(ops: readonly BatchOp[], opts: { seqStart: number; genId?: number; writer?: NetlinkWriter }): EncodedBatch {
  const w = opts.writer ?? new NetlinkWriter(Math.max(64 * 1024, ops.length * 160));
  w.pos = 0;
  let seq = opts.seqStart >>> 0;
  const beginSeq = seq;
  const opIndexBySeq = new Map<number, number>();
  const offsetBySeq = new Map<number, number>();

  const b = beginMessage(w, NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, seq, NFPROTO.UNSPEC, NFNL_SUBSYS.NFTABLES);
  if (opts.genId !== undefined) w.attrU32be(NFNL_BATCH_GENID, opts.genId);
  endMessage(w, b);

  let lastStart = -1;
  let messages = 0;
  const startMsg = (i: number, type: number, flags: number, family: number): number => {
    seq = (seq + 1) >>> 0;
    opIndexBySeq.set(seq, i);
    const s = beginMessage(w, nftType(type), NLM_F.REQUEST | flags, seq, family);
    offsetBySeq.set(seq, s);
    lastStart = s;
    messages++;
    return s;
  };

  for (let i = 0; i < ops.length; i++) {
    const op = ops[i];
    const flags = opFlags(op);
    const del = op.op === 'delete' || op.op === 'destroy' || op.op === 'flush';
    switch (op.kind) {
      case 'table': {
        const s = startMsg(i, MSG.table[op.op], flags, FAMILY_NUMBER[op.table.family]);
        encodeTable(w, op.table, del);
        endMessage(w, s);
        break;
      }
      case 'chain': {
        const s = startMsg(i, MSG.chain[op.op], flags, FAMILY_NUMBER[op.chain.family]);
        if (op.op === 'flush') encodeChainFlush(w, op.chain);
        else encodeChain(w, op.chain, del);
        endMessage(w, s);
        break;
      }
      case 'rule': {
        const s = startMsg(i, MSG.rule[op.op], flags, FAMILY_NUMBER[op.rule.family]);
        encodeRule(w, op.rule, op.op === 'delete' || op.op === 'destroy');
        endMessage(w, s);
        break;
      }
      case 'set': {
        const s = startMsg(i, MSG.set[op.op], flags, FAMILY_NUMBER[op.set.family]);
        if (op.op === 'flush') encodeElements(w, { family: op.set.family, table: op.set.table, set: op.set.name, elements: [] }, 0, 0, true);
        else encodeSet(w, op.set, del);
        endMessage(w, s);
        break;
      }
      case 'elements': {
        const spec = op.elements;
        const n = spec.elements.length;
        if (n === 0 && !del) break; // nothing to add
        const type = MSG.elements[op.op], family = FAMILY_NUMBER[spec.family];
        if (n === 0) { // a flush
          const s = startMsg(i, type, flags, family);
          encodeElements(w, spec, 0, 0, del);
          endMessage(w, s);
          break;
        }
        // Each element is encoded once, straight into its message; the one that would push the ELEMENTS nest past
        // MAX_ELEMENTS_BYTES is rewound and starts the next message (the same split as chunkElements()).
        let from = 0;
        while (from < n) {
          const s = startMsg(i, type, flags, family);
          w.attrStr(NFTA_SET_ELEM_LIST.TABLE, spec.table);
          w.attrStr(NFTA_SET_ELEM_LIST.SET, spec.set);
          if (!del && spec.setId !== undefined) w.attrU32be(NFTA_SET_ELEM_LIST.SET_ID, spec.setId);
          const list = w.nest(NFTA_SET_ELEM_LIST.ELEMENTS);
          let bytes = 0, k = from;
          for (; k < n; k++) {
            const e0 = w.pos;
            const nest = w.nest((k - from + 1) & 0x7fff);
            encodeElement(w, spec.elements[k], del);
            w.end(nest);
            const size = w.pos - e0;
            if (bytes + size > MAX_ELEMENTS_BYTES && k > from) { w.pos = e0; break; }
            bytes += size;
          }
          w.end(list);
          endMessage(w, s);
          from = k;
        }
        break;
      }
    }
  }
  const lastSeq = messages ? seq : beginSeq;
  if (lastStart >= 0) w.buf.writeUInt16LE(w.buf.readUInt16LE(lastStart + 6) | NLM_F.ACK, lastStart + 6);

  seq = (seq + 1) >>> 0;
  const e = beginMessage(w, NFNL_MSG_BATCH_END, NLM_F.REQUEST, seq, NFPROTO.UNSPEC, NFNL_SUBSYS.NFTABLES);
  endMessage(w, e);
  const buffer = Buffer.from(w.bytes());
  return { buffer, beginSeq, endSeq: seq, lastSeq, opIndexBySeq, offsetBySeq, bytes: buffer.length, messages };
}
