/**
 * Upstream kube-proxy's object names (kubernetes pkg/proxy/nftables/proxier.go: hashAndTruncate,
 * servicePortChainNameBase, servicePortEndpointChainNameBase, truncateNFTablesComment). Pure.
 */
import { hash } from 'node:crypto';

/** knftables.NameLengthMax (256) minus the longest chain prefix (16): proxier.go chainNameBaseLengthMax. */
export const CHAIN_NAME_BASE_LENGTH_MAX = 240;
/** knftables.CommentLengthMax: comments are truncated to 128 bytes. */
export const COMMENT_LENGTH_MAX = 128;

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 with padding (Go's base32.StdEncoding). */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let acc = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  while (out.length % 8 !== 0) out += '=';
  return out;
}

/**
 * `HASH-name`, HASH = first 8 chars of base32(sha256(name)); truncated to 240 chars with a trailing `...`.
 * Upstream: proxier.go hashAndTruncate.
 */
export function hashAndTruncate(name: string): string {
  // The first 8 base32 characters encode exactly the first 5 bytes of the digest (one-shot native hash).
  const prefix = base32(hash('sha256', name, 'buffer').subarray(0, 5));
  let out = `${prefix}-${name}`;
  if (Buffer.byteLength(out) > CHAIN_NAME_BASE_LENGTH_MAX) out = out.slice(0, CHAIN_NAME_BASE_LENGTH_MAX - 3) + '...';
  return out;
}

/** The identity fields of a ServicePort used in names. */
export interface ServicePortName {
  namespace: string;
  name: string;
  portName: string;
  /** Lowercase: tcp, udp, sctp. */
  protocol: string;
}

/** `HASH-ns/svc/proto/portName` (servicePortChainNameBase). */
export function servicePortChainNameBase(sp: ServicePortName): string {
  return hashAndTruncate(`${sp.namespace}/${sp.name}/${sp.protocol}/${sp.portName}`);
}

/** `HASH-ns/svc/proto/portName__ip/port`, IPv6 `:` replaced by `.` (servicePortEndpointChainNameBase). */
export function endpointChainNameBase(sp: ServicePortName, ip: string, port: number): string {
  return hashAndTruncate(`${sp.namespace}/${sp.name}/${sp.protocol}/${sp.portName}__${ip.replaceAll(':', '.')}/${port}`);
}

/** Chain and set names of one ServicePort (proxier.go newServiceInfo). */
export interface ServicePortNames {
  /** service-HASH-...: endpoints for Cluster traffic policy. */
  clusterChain: string;
  /** local-HASH-...: endpoints for Local traffic policy. */
  localChain: string;
  /** external-HASH-...: entry chain for NodePort / ExternalIP / LoadBalancer traffic. */
  externalChain: string;
  /** firewall-HASH-...: loadBalancerSourceRanges. */
  firewallChain: string;
}

export function servicePortNames(sp: ServicePortName): ServicePortNames {
  const base = servicePortChainNameBase(sp);
  return {
    clusterChain: `service-${base}`,
    localChain: `local-${base}`,
    externalChain: `external-${base}`,
    firewallChain: `firewall-${base}`,
  };
}

/** `endpoint-HASH-...` chain and `affinity-HASH-...` set of one endpoint. */
export function endpointNames(sp: ServicePortName, ip: string, port: number): { chain: string; affinitySet: string } {
  const base = endpointChainNameBase(sp, ip, port);
  return { chain: `endpoint-${base}`, affinitySet: `affinity-${base}` };
}

/** `ns/svc:port` (ServicePortName.String(); no `:port` for an unnamed port). */
export function servicePortNameString(sp: Pick<ServicePortName, 'namespace' | 'name' | 'portName'>): string {
  return `${sp.namespace}/${sp.name}${sp.portName ? `:${sp.portName}` : ''}`;
}

/** Truncates a comment to 128 bytes (truncateNFTablesComment), never splitting a UTF-8 character. */
export function truncateComment(s: string): string {
  if (Buffer.byteLength(s) <= COMMENT_LENGTH_MAX) return s;
  let out = '';
  for (const ch of s) {
    if (Buffer.byteLength(out + ch) > COMMENT_LENGTH_MAX) break;
    out += ch;
  }
  return out;
}
