/**
 * The typed nf_tables object and expression model shared by the codec (netlink/) and the compiler (rules/).
 *
 * Everything here is plain data. Byte values (`Uint8Array`) are exactly the bytes the kernel sees in a register:
 * packet header fields in network byte order; meta mark, ct state/status, fib results and numgen outputs in host
 * byte order (little-endian on x86 and arm64). See `../shared/reference/nftables-netlink.md` §2 "Byte-order rules".
 *
 * Protocol constants come from the Linux uapi headers `linux/netfilter/nf_tables.h`,
 * `linux/netfilter/nfnetlink.h`, `linux/netfilter.h` and `linux/netfilter/nf_nat.h` (6.18), and nftables'
 * `include/datatype.h` for set key type ids.
 */

/** NFPROTO_* (linux/netfilter.h): the nfgenmsg family of a table. */
export const NFPROTO = { UNSPEC: 0, INET: 1, IPV4: 2, ARP: 3, NETDEV: 5, BRIDGE: 7, IPV6: 10 } as const;
/** Table families we program: `ip` (NFPROTO_IPV4) and `ip6` (NFPROTO_IPV6). */
export type TableFamily = 'ip' | 'ip6';
export const FAMILY_NUMBER: Record<TableFamily, number> = { ip: NFPROTO.IPV4, ip6: NFPROTO.IPV6 };

/** Registers (nf_tables.h enum nft_registers): 0 is the verdict register, 1..4 the 16-byte registers,
 *  8..23 the 4-byte registers NFT_REG32_00..15 (NFT_REG_1 aliases NFT_REG32_00..03). */
export const NFT_REG = { VERDICT: 0, R1: 1, R2: 2, R3: 3, R4: 4, R32_00: 8 } as const;

/** nf_tables.h enum nft_payload_bases. */
export const PAYLOAD_BASE = { LL: 0, NETWORK: 1, TRANSPORT: 2, INNER: 3, TUN: 4 } as const;
/** nf_tables.h enum nft_meta_keys (subset we name; any number is accepted). */
export const META_KEY = {
  LEN: 0, PROTOCOL: 1, PRIORITY: 2, MARK: 3, IIF: 4, OIF: 5, IIFNAME: 6, OIFNAME: 7, IIFTYPE: 8, OIFTYPE: 9,
  NFPROTO: 15, L4PROTO: 16, PKTTYPE: 19,
} as const;
/** nf_tables.h enum nft_cmp_ops. */
export const CMP_OP = { EQ: 0, NEQ: 1, LT: 2, LTE: 3, GT: 4, GTE: 5 } as const;
/** nf_tables.h enum nft_ct_keys (subset). */
export const CT_KEY = { STATE: 0, DIRECTION: 1, STATUS: 2, MARK: 3, L3PROTOCOL: 7, PROTOCOL: 10, PROTO_SRC: 11, PROTO_DST: 12, SRC_IP: 19, DST_IP: 20, SRC_IP6: 21, DST_IP6: 22 } as const;
/** Conntrack state bits as ct state loads them (host order u32): linux/netfilter/nf_conntrack_common.h. */
export const CT_STATE_BIT = { INVALID: 1, ESTABLISHED: 2, RELATED: 4, NEW: 8, UNTRACKED: 0x40 } as const;
/** enum ip_conntrack_status bits (nf_conntrack_common.h). */
export const CT_STATUS_BIT = { EXPECTED: 0x1, SEEN_REPLY: 0x2, ASSURED: 0x4, CONFIRMED: 0x8, SRC_NAT: 0x10, DST_NAT: 0x20 } as const;
/** nf_tables.h enum nft_fib_result and enum nft_fib_flags. */
export const FIB_RESULT = { OIF: 1, OIFNAME: 2, ADDRTYPE: 3 } as const;
export const FIB_FLAG = { SADDR: 1, DADDR: 2, MARK: 4, IIF: 8, OIF: 16, PRESENT: 32 } as const;
/** linux/rtnetlink.h route types, as `fib ... type` compares them (host order u32). */
export const RTN = { UNSPEC: 0, UNICAST: 1, LOCAL: 2, BROADCAST: 3, ANYCAST: 4, MULTICAST: 5 } as const;
/** nf_tables.h enum nft_numgen_types. */
export const NUMGEN_TYPE = { INCREMENTAL: 0, RANDOM: 1 } as const;
/** nf_tables.h enum nft_nat_types. */
export const NAT_TYPE = { SNAT: 0, DNAT: 1 } as const;
/** linux/netfilter/nf_nat.h NF_NAT_RANGE_* flags. */
export const NAT_FLAG = { MAP_IPS: 1, PROTO_SPECIFIED: 2, PROTO_RANDOM: 4, PERSISTENT: 8, PROTO_RANDOM_FULLY: 16, PROTO_OFFSET: 32, NETMAP: 64 } as const;
/** nf_tables.h enum nft_reject_types, and ICMP codes (linux/icmp.h, icmpv6.h, nf_tables.h nft_reject_inet_code). */
export const REJECT_TYPE = { ICMP_UNREACH: 0, TCP_RST: 1, ICMPX_UNREACH: 2 } as const;
export const ICMP_CODE = { NET_UNREACH: 0, HOST_UNREACH: 1, PROT_UNREACH: 2, PORT_UNREACH: 3, ADMIN_PROHIBITED: 13 } as const;
export const ICMPV6_CODE = { NOROUTE: 0, ADM_PROHIBITED: 1, ADDR_UNREACH: 3, PORT_UNREACH: 4 } as const;
/** nf_tables.h enum nft_dynset_ops. */
export const DYNSET_OP = { ADD: 0, UPDATE: 1, DELETE: 2 } as const;
/** nf_tables.h enum nft_lookup_flags. */
export const LOOKUP_FLAG = { INV: 1 } as const;
/** nf_tables.h enum nft_bitwise_ops. */
export const BITWISE_OP = { MASK_XOR: 0, LSHIFT: 1, RSHIFT: 2 } as const;

/** linux/netfilter.h NF_INET_* hook numbers (ip, ip6, inet families). */
export const HOOK = { PREROUTING: 0, INPUT: 1, FORWARD: 2, OUTPUT: 3, POSTROUTING: 4 } as const;
/** nft's named priorities (nftables src/rule.c std_prios): dstnat -100, filter 0, srcnat 100. */
export const PRIORITY = { RAW: -300, MANGLE: -150, DSTNAT: -100, FILTER: 0, SECURITY: 50, SRCNAT: 100 } as const;

/** nf_tables.h NFT_SET_* flags. */
export const SET_FLAG = { ANONYMOUS: 0x1, CONSTANT: 0x2, INTERVAL: 0x4, MAP: 0x8, TIMEOUT: 0x10, EVAL: 0x20, OBJECT: 0x40, CONCAT: 0x80, EXPR: 0x100 } as const;
/** nf_tables.h NFT_SET_ELEM_* flags. */
export const SET_ELEM_FLAG = { INTERVAL_END: 0x1, CATCHALL: 0x2 } as const;
/** NFT_DATA_VERDICT (nf_tables.h enum nft_data_types): the data type of a verdict map. */
export const NFT_DATA_VERDICT = 0xffffff00;
/** nftables include/datatype.h enum datatypes: key type ids nft uses to print sets. */
export const DATATYPE = { INVALID: 0, VERDICT: 1, INTEGER: 4, STRING: 5, IPADDR: 7, IP6ADDR: 8, INET_PROTOCOL: 12, INET_SERVICE: 13, MARK: 19, IFNAME: 41 } as const;
/** libnftnl NFTNL_UDATA_SET_*BYTEORDER values. */
export const BYTEORDER = { INVALID: 0, HOST: 1, BIG: 2 } as const;

/**
 * A verdict (nf_tables.h NF_ACCEPT 1, NF_DROP 0; NFT_CONTINUE -1, NFT_BREAK -2, NFT_JUMP -3, NFT_GOTO -4,
 * NFT_RETURN -5). Jump and goto carry the target chain name.
 */
export type Verdict =
  | { kind: 'accept' }
  | { kind: 'drop' }
  | { kind: 'continue' }
  | { kind: 'break' }
  | { kind: 'return' }
  | { kind: 'jump'; chain: string }
  | { kind: 'goto'; chain: string };

/** NFTA_DATA_*: a value (register bytes) or a verdict. */
export type NftData = { value: Uint8Array } | { verdict: Verdict };

/**
 * One nf_tables expression, as NFTA_LIST_ELEM{NFTA_EXPR_NAME, NFTA_EXPR_DATA}. Register numbers follow NFT_REG.
 * Optional fields are omitted from the wire when undefined.
 */
export type Expr =
  | { type: 'payload'; dreg: number; base: number; offset: number; len: number }
  | { type: 'meta'; key: number; dreg: number }
  | { type: 'meta_set'; key: number; sreg: number }
  | { type: 'cmp'; sreg: number; op: number; data: Uint8Array }
  | { type: 'range'; sreg: number; op: number; from: Uint8Array; to: Uint8Array }
  /** `op` (NFTA_BITWISE_OP, BITWISE_OP) is sent only when set; nft sends 0 for some mark operations. */
  | { type: 'bitwise'; sreg: number; dreg: number; len: number; mask: Uint8Array; xor: Uint8Array; op?: number }
  | { type: 'lookup'; sreg: number; set: string; setId?: number; dreg?: number; flags?: number }
  | { type: 'immediate'; dreg: number; data: NftData }
  | {
      type: 'nat'; natType: number; family: number;
      regAddrMin?: number; regAddrMax?: number; regProtoMin?: number; regProtoMax?: number; flags?: number;
    }
  | { type: 'masq'; flags?: number; regProtoMin?: number; regProtoMax?: number }
  | { type: 'numgen'; dreg: number; modulus: number; ngType: number; offset?: number }
  | { type: 'ct'; key: number; dreg: number; direction?: number }
  | { type: 'ct_set'; key: number; sreg: number; direction?: number }
  | { type: 'fib'; dreg: number; result: number; flags: number }
  | { type: 'reject'; rejectType: number; icmpCode: number }
  | { type: 'counter'; bytes?: bigint; packets?: bigint }
  | { type: 'dynset'; op: number; set: string; setId?: number; sregKey: number; sregData?: number; timeoutMs?: bigint; flags?: number }
  /** An expression this codec does not know. It round-trips byte for byte and is never dropped. */
  | { type: 'opaque'; name: string; data: Uint8Array };

/** A table (NFTA_TABLE_*). */
export interface TableSpec {
  family: TableFamily;
  name: string;
  flags?: number;
  comment?: string;
  /** Kernel handle; dump only. */
  handle?: bigint;
}

/** The hook of a base chain (NFTA_CHAIN_HOOK, NFTA_CHAIN_TYPE, NFTA_CHAIN_POLICY). */
export interface ChainHook {
  type: 'filter' | 'nat' | 'route';
  hooknum: number;
  priority: number;
  /** NF_ACCEPT 1 / NF_DROP 0; omitted means the kernel default, accept. */
  policy?: 'accept' | 'drop';
}

/** A chain (NFTA_CHAIN_*). A base chain has a hook. */
export interface ChainSpec {
  family: TableFamily;
  table: string;
  name: string;
  hook?: ChainHook;
  comment?: string;
  handle?: bigint;
}

/** A rule (NFTA_RULE_*). `comment` goes into NFTA_RULE_USERDATA as NFTNL_UDATA_RULE_COMMENT. */
export interface RuleSpec {
  family: TableFamily;
  table: string;
  chain: string;
  exprs: Expr[];
  comment?: string;
  /** Kernel handle: set in dumps; in a NEWRULE with `replace`, the rule to replace. */
  handle?: bigint;
  /** NFTA_RULE_POSITION: insert relative to this rule handle. */
  position?: bigint;
}

/**
 * A set or map (NFTA_SET_*). `id` is NFTA_SET_ID, mandatory in NEWSET (unique within a batch).
 * keyLen and dataLen are bytes; concatenations use 4-byte-padded components.
 */
export interface SetSpec {
  family: TableFamily;
  table: string;
  name: string;
  flags: number;
  /** nft datatype id (DATATYPE), concatenations combined as (t1 << 6 | t2) << 6 | t3. */
  keyType: number;
  keyLen: number;
  /** Maps only: a DATATYPE id, or NFT_DATA_VERDICT for verdict maps. */
  dataType?: number;
  /** Maps only: data length in bytes; 0 for verdict maps. */
  dataLen?: number;
  /** Default element timeout in ms (requires SET_FLAG.TIMEOUT). */
  timeoutMs?: bigint;
  /** NFTA_SET_DESC_SIZE. */
  size?: number;
  /** NFTA_SET_DESC_CONCAT field lengths in bytes, unpadded (interval + concat sets only). */
  concatFieldLens?: number[];
  /** NFTNL_UDATA_SET_KEYBYTEORDER / DATABYTEORDER / COMMENT, in that order when present. */
  keyByteOrder?: number;
  dataByteOrder?: number;
  /**
   * NFTNL_UDATA_SET_KEY_TYPEOF (3), DATA_TYPEOF (4) and DATA_INTERVAL (6) TLVs (decoded: also 2 and 5), raw (nft's `typeof` declarations; written after the
   * byte orders and before the comment, as nft 1.0.6 does).
   */
  typeofUdata?: Uint8Array;
  comment?: string;
  id?: number;
  handle?: bigint;
}

/** A set element (NFTA_SET_ELEM_*). `key` and map `data` values are register bytes, padded per component. */
export interface ElementSpec {
  key: Uint8Array;
  keyEnd?: Uint8Array;
  data?: NftData;
  flags?: number;
  timeoutMs?: bigint;
  /** Remaining time in ms; dump only. */
  expirationMs?: bigint;
  comment?: string;
}

/** Elements of one set (NFTA_SET_ELEM_LIST_*). `setId` references a set created in the same batch. */
export interface ElementsSpec {
  family: TableFamily;
  table: string;
  set: string;
  setId?: number;
  elements: ElementSpec[];
}

/**
 * One operation of a batch. Semantics follow `nft` (reference §1.3):
 * - add: NEW* with NLM_F_CREATE (tables: no flags); an existing object is kept or updated; rules are appended.
 * - create: NEW* with NLM_F_CREATE|NLM_F_EXCL; an existing object is an error (EEXIST).
 * - insert (rules only): NEWRULE without APPEND: at the head of the chain, or before `position`.
 * - replace (rules only): NEWRULE with NLM_F_REPLACE and the rule's handle.
 * - delete: DEL*; a missing object is an error (ENOENT).
 * - destroy: DESTROY* (kernel 6.3+); a missing object is not an error.
 * - flush: chain = DELRULE with table+chain only; set = DELSETELEM without elements.
 */
export type BatchOp =
  | { op: 'add' | 'create' | 'delete' | 'destroy'; kind: 'table'; table: TableSpec }
  | { op: 'add' | 'create' | 'delete' | 'destroy' | 'flush'; kind: 'chain'; chain: ChainSpec }
  | { op: 'add' | 'insert' | 'replace' | 'delete' | 'destroy'; kind: 'rule'; rule: RuleSpec }
  | { op: 'add' | 'create' | 'delete' | 'destroy' | 'flush'; kind: 'set'; set: SetSpec }
  | { op: 'add' | 'create' | 'delete' | 'destroy'; kind: 'elements'; elements: ElementsSpec };
