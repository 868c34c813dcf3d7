import { runInPrivateWorld } from '/work/wt/kube/e2e/world/netns.ts';
const t0 = Date.now();
const r = runInPrivateWorld(process.argv[2], [], 170_000);
console.log('status', r.status, 'ms', Date.now() - t0);
console.log(r.stderr.slice(-3000));
console.log(r.stdout.slice(-8000));
