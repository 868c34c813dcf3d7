/**
 * The rule compiler layer (rules/): snapshot -> typed ruleset -> planned batch / nft text / packet traces.
 * See model.ts for the data model, compile.ts for the compiler, plan.ts for the planner, render.ts for the nft
 * text, lower.ts for the netlink lowering and trace.ts for the packet tracer.
 */
export { compile, allocatorOf } from './compile.ts';
export { commitDelta, rollbackDelta, committedView, Journal } from './incremental.ts';
export type { RulesetDelta } from './incremental.ts';
export { EndpointAllocator, rebuildEndpointAllocator, capacityFor, ownerComment, assignSlots, isEndpointMap, endpointMapOf, shardOf, SHARD_KEYS, ENDPOINT_MAP_PREFIX } from './endpoint-select.ts';
export type { EndpointBlock } from './endpoint-select.ts';
export type { CompileOptions } from './compile.ts';
export { plan, toBatchOps, stepsToOps, creationSteps, fullSteps, STALE_CHAIN_DELAY_MS, ELEMENTS_PER_OP, ELEMENT_BYTES_PER_OP } from './plan.ts';
export type { PlanOptions, PlanStep, SyncPlan } from './plan.ts';
export { render, renderPlan, renderSteps, ruleText, stmtText, elementText } from './render.ts';
export { trace } from './trace.ts';
export type { TraceContext, TraceOutcome, TracePacket, TraceResult, TraceVerdict } from './trace.ts';
export { lowerRule, lowerStmt, setSpec, chainSpec, ruleSpec, elementSpec, tableSpec, elementKeyBytes, formatExpr, formatExprs } from './lower.ts';
export { S, SKELETON_KEY, buildRuleset, rule, elementKeyText, elementValueText, verdictText, fingerprintOf, L4PROTO_NUMBER } from './model.ts';
export type {
  BaseHook, Chain, CtStateName, Element, Fragment, HookName, IndexedElement, KeyField, KeyPart, KeyType, L4Proto, Rule,
  Ruleset, RulesetIndex, SetDef, Stmt,
} from './model.ts';
export { CHAINS, SETS, TABLE_COMMENT, skeletonFragment, masqueradeMark } from './skeleton.ts';
export { hashAndTruncate, servicePortNames, endpointNames, servicePortNameString } from './names.ts';
