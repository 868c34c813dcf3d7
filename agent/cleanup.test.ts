import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BatchOp, ChainSpec, TableFamily, TableSpec } from '../netlink/types.ts';
import { BatchError } from '../netlink/socket.ts';
import { deleteTables, findKubeProxyLeftovers } from './cleanup.ts';

/** A fake kernel: tables by "family name", chains per table. */
function fakeKernel(tables: Record<string, string[]>) {
  const sent: string[] = [];
  return {
    sent,
    tables,
    async sendBatch(ops: readonly BatchOp[]) {
      for (const [i, op] of ops.entries()) {
        if (op.kind !== 'table' || op.op !== 'delete') throw new Error('unexpected op');
        const k = `${op.table.family} ${op.table.name}`;
        sent.push(k);
        if (!(k in tables)) throw new BatchError([{ opIndex: i, op, seq: 1, errno: 2, errnoName: 'ENOENT' }]);
        delete tables[k];
      }
    },
    async listTables(family?: TableFamily): Promise<TableSpec[]> {
      return Object.keys(tables).map((k) => k.split(' ')).filter(([f]) => !family || f === family).map(([f, name]) => ({ family: f as TableFamily, name }));
    },
    async listChains(family: TableFamily, table: string): Promise<ChainSpec[]> {
      return (tables[`${family} ${table}`] ?? []).map((name) => ({ family, table, name }));
    },
  };
}

test('cleanup deletes our ip and ip6 tables and nothing else; absent tables are fine', async () => {
  const k = fakeKernel({ 'ip nftproxy': ['services'], 'ip filter': ['INPUT'], 'ip kube-proxy': ['services'] });
  const r = await deleteTables(k, ['nftproxy']);
  assert.deepEqual(r, [{ table: 'ip nftproxy', action: 'deleted' }, { table: 'ip6 nftproxy', action: 'absent' }]);
  assert.deepEqual(Object.keys(k.tables).sort(), ['ip filter', 'ip kube-proxy']);
});

test('cleanup --kube-proxy names iptables-nft, legacy and ipvs leftovers without touching them', async () => {
  const k = fakeKernel({ 'ip nat': ['PREROUTING', 'KUBE-SERVICES', 'KUBE-POSTROUTING'], 'ip filter': ['INPUT'], 'ip6 kube-proxy': ['services'] });
  const files: Record<string, string> = {
    '/proc/net/ip_tables_names': 'nat\nfilter\n', '/proc/net/ip6_tables_names': '',
    '/sys/class/net/kube-ipvs0/ifindex': '5\n',
    '/proc/net/ip_vs': 'IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\nTCP  0A600001:01BB rr\n',
  };
  await deleteTables(k, ['nftproxy', 'kube-proxy']);
  assert.ok(!('ip6 kube-proxy' in k.tables));
  const l = await findKubeProxyLeftovers(k, (p) => files[p] ?? null);
  assert.equal(l.length, 4, JSON.stringify(l));
  assert.match(l[0].what, /table ip nat has kube-proxy chains \(iptables-nft\): KUBE-POSTROUTING, KUBE-SERVICES/);
  assert.match(l[0].advice, /kube-proxy --cleanup/);
  assert.match(l[1].what, /legacy x_tables are loaded \(\/proc\/net\/ip_tables_names: nat, filter\)/);
  assert.match(l[2].what, /kube-ipvs0/);
  assert.match(l[3].what, /1 ipvs virtual server/);
  assert.ok('ip nat' in k.tables && 'ip filter' in k.tables, 'leftovers are only named');
  assert.deepEqual(await findKubeProxyLeftovers(fakeKernel({ 'ip filter': ['INPUT'] }), () => null), []);
});
