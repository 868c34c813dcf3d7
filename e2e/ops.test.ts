/**
 * Operations end to end, in network namespaces (scenarios/ops.ts in a private world): the kernel probe,
 * `run --init-only`, oomScoreAdj, /livez, the config watch (invalid: reported and kept running; valid: exit 0 with
 * the ruleset in place), `cleanup` (ours only, both families) and `--cleanup --kube-proxy`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eSkip, scenarioResult } from './world/netns.ts';

const skip = e2eSkip('e2e/ops.test.ts');

test('init-only, kernel check, oomScoreAdj, config watch, cleanup and --cleanup --kube-proxy', { skip: skip ?? false, timeout: 120_000 }, () => {
  const o = scenarioResult(new URL('./world/scenarios/ops.ts', import.meta.url), [], 100_000);

  // The kernel probe passes for both families and leaves no table behind.
  assert.deepEqual(o.check, { status: 0, passed: ['ip', 'ip6'] });
  assert.deepEqual(o.tablesAfterCheck, []);

  // --init-only: the namespace's conntrack sysctls get the config's values (24h, 1h; tcpBeLiberal false leaves be_liberal as it was, 1: upstream only ever writes 1) and it exits 0
  // without creating any table; another namespace keeps its own values.
  assert.equal(o.initOnly.status, 0);
  assert.deepEqual(o.initOnly.sysctls, { nf_conntrack_tcp_timeout_established: 86400, nf_conntrack_tcp_timeout_close_wait: 3600, nf_conntrack_tcp_be_liberal: 1 });
  assert.deepEqual(o.initOnly.other, { nf_conntrack_tcp_timeout_established: 1000, nf_conntrack_tcp_timeout_close_wait: 100, nf_conntrack_tcp_be_liberal: 1 });
  assert.equal(o.initOnly.written, 2); // the two timeouts; be_liberal is not written when tcpBeLiberal is false
  assert.deepEqual(o.initOnly.tables, []);

  // run: the kernel check is logged for both families, oom_score_adj is -999, /livez answers, only our two tables.
  assert.equal(o.agentUp, true);
  assert.deepEqual(o.kernelCheckLogged, ['ip', 'ip6']);
  // oomScoreAdj -999: set where the process may lower it (CAP_SYS_RESOURCE); otherwise a warning and it runs on.
  assert.equal(o.oomScoreAdj.length, 1, JSON.stringify(o.oomScoreAdj));
  if (o.hasSysResource) assert.equal(o.oomScoreAdj[0], -999);
  else {
    console.log('# note: no CAP_SYS_RESOURCE here, so oom_score_adj -999 cannot be set; checking the warning instead');
    assert.equal(o.oomScoreAdj[0], 0);
    assert.match(o.oomWarning, /cannot write -999 to \/proc\/self\/oom_score_adj: (EACCES|EPERM)/);
  }
  assert.equal(o.livez, '200');
  assert.deepEqual(o.tablesRunning, ['table ip nftproxy', 'table ip6 nftproxy']);

  // The config watch: an invalid file is reported with the field and the agent keeps running...
  assert.match(o.invalidReported, /nftables\.syncPeriod/);
  assert.equal(o.runningAfterInvalid, true);
  // ...a valid change makes it exit 0 (for its supervisor to restart it), leaving the ruleset in place.
  assert.equal(o.exitAfterChange, 0);
  assert.equal(o.changeLogged, true);
  assert.deepEqual(o.tablesAfterExit, ['table ip nftproxy', 'table ip6 nftproxy']);
  assert.deepEqual(o.agentErrors, [], 'no other warnings or errors in the agent log');
  // The supervisor's restart runs with the new file (minSyncPeriod 2 s, oomScoreAdj 500); SIGTERM: exit 0 within 5 s,
  // the ruleset stays.
  assert.deepEqual(o.restarted, { minSyncPeriod: 2000, synced: true });
  assert.deepEqual(o.restartedOom, [500]);
  assert.equal(o.sigtermExit, 0);
  assert.ok(o.sigtermExitMs < 5000, `SIGTERM exit took ${o.sigtermExitMs} ms`);
  assert.deepEqual(o.tablesAfterSigterm, ['table ip nftproxy', 'table ip6 nftproxy']);

  // --cleanup --kube-proxy: kube-proxy's nftables tables go, ours stay; the iptables-nft leftover is named, not touched.
  assert.equal(o.cleanupKubeProxy.status, 0);
  assert.deepEqual(o.cleanupKubeProxy.summary.tables, [{ table: 'ip kube-proxy', action: 'deleted' }, { table: 'ip6 kube-proxy', action: 'deleted' }]);
  assert.equal(o.cleanupKubeProxy.summary.leftovers.length, 1, JSON.stringify(o.cleanupKubeProxy.summary.leftovers));
  assert.match(o.cleanupKubeProxy.summary.leftovers[0].what, /table ip nat has kube-proxy chains \(iptables-nft\): KUBE-SERVICES/);
  assert.deepEqual(o.cleanupKubeProxy.tables, ['table ip filter', 'table ip nat', 'table ip nftproxy', 'table ip6 nftproxy']);
  // cleanup: both of our tables go, the foreign ones stay.
  assert.equal(o.cleanup.status, 0);
  assert.deepEqual(o.cleanup.summary.tables, [{ table: 'ip nftproxy', action: 'deleted' }, { table: 'ip6 nftproxy', action: 'deleted' }]);
  assert.deepEqual(o.cleanup.tables, ['table ip filter', 'table ip nat']);
});
