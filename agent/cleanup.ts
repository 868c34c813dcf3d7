/**
 * `nftproxy cleanup` (alias `--cleanup`, as kube-proxy's flag) and `cleanup --kube-proxy`.
 *
 * - Our own objects are exactly the tables `ip <tableName>` and `ip6 <tableName>`: deleting them removes every
 *   chain, set, map, rule and element we made. Nothing else is touched. A table that is not there is fine.
 * - `--kube-proxy` instead deletes kube-proxy's nftables-mode tables `ip kube-proxy` and `ip6 kube-proxy` (and
 *   leaves ours, so it can run next to a running agent), as
 *   upstream's own cleanup does (kubernetes `pkg/proxy/nftables/cleanup.go`; reference kube-proxy-nftables.md §10.3),
 *   all over netlink. kube-proxy's iptables- and ipvs-mode leftovers are NOT removed (we carry no iptables or
 *   ipvsadm code); they are detected and named with the command the admin should run:
 *   - iptables-nft: chains named `KUBE-*` in nftables tables of family ip/ip6 (tables `nat`, `filter`, `mangle`);
 *   - iptables-legacy: loaded x_tables (`/proc/net/ip_tables_names`, `/proc/net/ip6_tables_names`);
 *   - ipvs: the `kube-ipvs0` dummy interface (`/sys/class/net/kube-ipvs0`) and virtual servers in `/proc/net/ip_vs`.
 */
import type { BatchOp, ChainSpec, TableFamily, TableSpec } from '../netlink/types.ts';
import { BatchError } from '../netlink/socket.ts';

/** kube-proxy's own nftables table name (kubernetes `pkg/proxy/nftables/proxier.go` kubeProxyTable). */
export const KUBE_PROXY_TABLE = 'kube-proxy';

/** What cleanup needs of the socket (NftSocket fits). */
export interface CleanupSocket {
  sendBatch(ops: readonly BatchOp[]): Promise<unknown>;
  listTables(family?: TableFamily): Promise<TableSpec[]>;
  listChains(family: TableFamily, table: string): Promise<ChainSpec[]>;
}

/** Reads a file; returns null when it does not exist or cannot be read. Injected for tests. */
export type ReadFileOrNull = (path: string) => string | null;

/** One table's outcome. */
export interface TableOutcome { table: string; action: 'deleted' | 'absent' | 'failed'; error?: string }

/** Deletes `ip NAME` and `ip6 NAME` for each name, one batch per table (so one failure does not stop the rest). */
export async function deleteTables(sock: CleanupSocket, names: readonly string[]): Promise<TableOutcome[]> {
  const out: TableOutcome[] = [];
  for (const name of names) {
    for (const family of ['ip', 'ip6'] as const) {
      const table = `${family} ${name}`;
      try {
        await sock.sendBatch([{ op: 'delete', kind: 'table', table: { family, name } }]);
        out.push({ table, action: 'deleted' });
      } catch (err) {
        if (err instanceof BatchError && err.errors.every((e) => e.errnoName === 'ENOENT')) out.push({ table, action: 'absent' });
        else if (err instanceof BatchError && err.errors.every((e) => e.errnoName === 'EAFNOSUPPORT')) out.push({ table, action: 'absent' });
        else out.push({ table, action: 'failed', error: (err as Error).message });
      }
    }
  }
  return out;
}

/** A leftover of another kube-proxy mode, and what the admin should run. */
export interface Leftover { what: string; advice: string }

/**
 * Finds kube-proxy's iptables and ipvs leftovers (see the module comment). Read-only: never changes anything.
 */
export async function findKubeProxyLeftovers(sock: CleanupSocket, readFile: ReadFileOrNull): Promise<Leftover[]> {
  const out: Leftover[] = [];
  for (const family of ['ip', 'ip6'] as const) {
    const tables = await sock.listTables(family).catch(() => [] as TableSpec[]);
    for (const t of tables) {
      if (t.name === KUBE_PROXY_TABLE) continue;
      const chains = await sock.listChains(family, t.name).catch(() => [] as ChainSpec[]);
      const kube = chains.map((c) => c.name).filter((n) => n.startsWith('KUBE-')).sort();
      if (kube.length) {
        const tool = family === 'ip' ? 'iptables' : 'ip6tables';
        out.push({
          what: `table ${family} ${t.name} has kube-proxy chains (iptables-nft): ${kube.slice(0, 8).join(', ')}${kube.length > 8 ? ` and ${kube.length - 8} more` : ''}`,
          advice: `run "kube-proxy --cleanup" once with the same kube-proxy version, or inspect with "${tool}-nft-save -t ${t.name} | grep KUBE-"`,
        });
      }
    }
  }
  for (const [file, tool] of [['/proc/net/ip_tables_names', 'iptables-legacy'], ['/proc/net/ip6_tables_names', 'ip6tables-legacy']] as const) {
    const names = (readFile(file) ?? '').split('\n').map((s) => s.trim()).filter(Boolean);
    if (names.length) {
      out.push({
        what: `legacy x_tables are loaded (${file}: ${names.join(', ')}); kube-proxy's iptables mode (legacy backend) may have left KUBE-* chains there`,
        advice: `check with "${tool}-save | grep KUBE-" and remove them with "kube-proxy --cleanup"`,
      });
    }
  }
  if (readFile('/sys/class/net/kube-ipvs0/ifindex') !== null) {
    out.push({ what: 'the kube-ipvs0 interface of kube-proxy\'s ipvs mode exists', advice: 'run "kube-proxy --cleanup" (or "ip link delete kube-ipvs0" after "ipvsadm --clear")' });
  }
  const ipvs = (readFile('/proc/net/ip_vs') ?? '').split('\n').filter((l) => /^(TCP|UDP|SCTP|FWM)\s/.test(l));
  if (ipvs.length) out.push({ what: `${ipvs.length} ipvs virtual server(s) in /proc/net/ip_vs`, advice: 'run "kube-proxy --cleanup" or "ipvsadm --clear"' });
  return out;
}
