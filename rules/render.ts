/**
 * Rendering of the ruleset model to `nft -f` text. Every statement renders as `nft list ruleset` prints it, so the
 * text of a pushed table re-parses to the same expressions (verified with nft 1.0.6; see testdata/README.md).
 *
 * `render(ruleset)` emits the same operations, in the same order, as the full plan's batch (plan.ts), so that
 * `nft -f` of the text and our netlink push leave identical tables, handles included. Pure.
 */
import type { TableFamily } from '../netlink/types.ts';
import { formatCidr, parseAddr, formatAddr, parseCidr } from './addr.ts';
import type { Chain, Element, KeyField, Rule, Ruleset, SetDef, Stmt } from './model.ts';
import { elementKeyText, verdictText } from './model.ts';
import type { PlanStep } from './plan.ts';
import { fullSteps } from './plan.ts';

function hex8(n: number): string {
  return '0x' + (n >>> 0).toString(16).padStart(8, '0');
}

function fieldText(family: TableFamily, f: KeyField): string {
  if (f === 'l4proto') return 'meta l4proto';
  if (f === 'dport') return 'th dport';
  return `${family} ${f}`;
}

/** nft string literal. @throws Error when the text contains a double quote or a control character. */
export function quote(s: string, what = 'string'): string {
  if (/["\x00-\x1f\x7f]/.test(s)) throw new Error(`${what}: ${JSON.stringify(s)} contains a double quote or control character, which nft cannot express`);
  return `"${s}"`;
}

/** nft text of one statement (as `nft list ruleset` prints it). */
export function stmtText(family: TableFamily, s: Stmt): string {
  switch (s.k) {
    case 'addr': return `${family} ${s.field} ${s.neg ? '!= ' : ''}${formatCidr(parseCidr(family, s.cidr, `${s.field} match`))}`;
    case 'lookup': return `${s.key.map((f) => fieldText(family, f)).join(' . ')} ${s.neg ? '!= ' : ''}@${s.set}`;
    case 'vmap': return `${s.key.map((f) => fieldText(family, f)).join(' . ')} vmap @${s.map}`;
    case 'l4proto': return `meta l4proto ${s.proto}`;
    case 'ctState': return `ct state ${s.state}`;
    case 'ctStatus': return `ct status ${s.status}`;
    case 'fibLocal': return `fib ${s.addr} type local`;
    case 'iifname': return `iifname ${s.neg ? '!= ' : ''}${quote(s.name, 'iifname')}`;
    case 'markTest': return `meta mark & ${hex8(s.mask)} ${s.neg ? '!=' : '=='} ${hex8(s.value)}`;
    case 'numgen': return `numgen random mod ${s.mod} ${s.value}`;
    case 'markSet': return `meta mark set meta mark ${s.op === 'or' ? '|' : '^'} ${hex8(s.bits)}`;
    case 'dnatMap': return `dnat ${family} to numgen random mod ${s.mod}${s.offset ? ` offset ${s.offset}` : ''} map @${s.map}`;
    case 'dnat': {
      const a = formatAddr(parseAddr(family, s.addr, 'dnat address'));
      return family === 'ip' ? `dnat to ${a}:${s.port}` : `dnat to [${a}]:${s.port}`;
    }
    case 'masquerade': return s.fullyRandom ? 'masquerade fully-random' : 'masquerade';
    case 'update': return `update @${s.set} { ${family} ${s.field} }`;
    case 'counter': return 'counter';
    case 'reject': return 'reject';
    case 'verdict': return verdictText(s.verdict);
  }
}

/** nft text of a rule body (statements and comment). */
export function ruleText(family: TableFamily, r: Rule): string {
  const body = r.stmts.map((s) => stmtText(family, s)).join(' ');
  return r.comment === undefined ? body : `${body} comment ${quote(r.comment, 'rule comment')}`;
}

/** `{ type filter hook prerouting priority -110 ; comment "..." ; }` or '' for a plain chain. */
function chainBody(c: Chain): string {
  const parts: string[] = [];
  if (c.hook) parts.push(`type ${c.hook.type} hook ${c.hook.hook} priority ${c.hook.priority} ;`);
  if (c.comment !== undefined) parts.push(`comment ${quote(c.comment, 'chain comment')} ;`);
  return parts.length ? ` { ${parts.join(' ')} }` : '';
}

function setBody(s: SetDef, family: TableFamily): string {
  const parts = [s.map === 'endpoint'
    ? `typeof numgen random mod 1 : ${family} daddr . th dport ;`
    : `type ${s.key.join(' . ')}${s.map ? ` : ${s.map}` : ''} ;`];
  if (s.timeoutSec !== undefined) parts.push('flags dynamic,timeout ;', `timeout ${s.timeoutSec}s ;`);
  if (s.comment !== undefined) parts.push(`comment ${quote(s.comment, 'set comment')} ;`);
  return `{ ${parts.join(' ')} }`;
}

/** nft text of an element in an `add element` list: `key [comment "..."] [: verdict | : addr . port]`. */
export function elementText(e: Element): string {
  let s = elementKeyText(e);
  if (e.comment !== undefined) s += ` comment ${quote(e.comment, 'element comment')}`;
  if (e.verdict) s += ` : ${verdictText(e.verdict)}`;
  if (e.endpoint) s += ` : ${e.endpoint.ip} . ${e.endpoint.port}`;
  return s;
}

/** One nft command line per plan step, for table `family name`. */
export function renderSteps(family: TableFamily, table: string, comment: string, steps: readonly PlanStep[]): string {
  const t = `${family} ${table}`;
  const lines: string[] = [];
  for (const st of steps) {
    switch (st.kind) {
      case 'table':
        lines.push(st.op === 'add' ? `add table ${t} { comment ${quote(comment, 'table comment')} ; }` : `delete table ${t}`);
        break;
      case 'chain':
        lines.push(st.op === 'add' ? `add chain ${t} ${st.chain.name}${chainBody(st.chain)}` : `${st.op} chain ${t} ${st.name}`);
        break;
      case 'set':
        lines.push(st.op === 'add' ? `add ${st.set.map ? 'map' : 'set'} ${t} ${st.set.name} ${setBody(st.set, family)}` : `delete ${st.isMap ? 'map' : 'set'} ${t} ${st.name}`);
        break;
      case 'rule':
        lines.push(`add rule ${t} ${st.chain} ${ruleText(family, st.rule)}`);
        break;
      case 'elements':
        if (st.elements.length === 0) break;
        lines.push(st.op === 'add'
          ? `add element ${t} ${st.set} { ${st.elements.map(elementText).join(', ')} }`
          : `delete element ${t} ${st.set} { ${st.elements.map((e) => elementKeyText(e)).join(', ')} }`);
        break;
    }
  }
  return lines.join('\n') + (lines.length ? '\n' : '');
}

/**
 * `nft -f` text that builds exactly this table, whatever the kernel held before: `add table`, `delete table`,
 * `add table`, then chains, sets, rules and elements in the order of the full plan's batch.
 */
export function render(ruleset: Ruleset): string {
  return renderSteps(ruleset.family, ruleset.table, ruleset.comment, fullSteps(ruleset));
}

/** The nft text of a plan's operations (debug logs: "the nft text of each delta"), for `rs`'s table. */
export function renderPlan(rs: Pick<Ruleset, 'family' | 'table' | 'comment'>, plan: { steps: readonly PlanStep[] }): string {
  return renderSteps(rs.family, rs.table, rs.comment, plan.steps);
}
