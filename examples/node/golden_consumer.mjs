#!/usr/bin/env node
// A minimal consumer of npoptim's golden files in plain Node.js (no npm packages):
// reads case files, runs its own Adam and SparseAdam over every case, and writes a results
// file (schema "npoptim-golden", kind "results") for `npoptim verify`.
//
//   node golden_consumer.mjs [--bug eps-placement] -o results.json CASES.json [CASES.json ...]
//
// float32 cases are computed in float32: every operation's float64 result is rounded with
// Math.fround, which for + - * / and sqrt gives exactly the IEEE float32 result.
// --bug eps-placement swaps where eps is added (Adam gets SparseAdam's "eps-hat" form
// m/(sqrt(v)+eps) * sqrt(bc2)/bc1, SparseAdam gets Adam's): a realistic porting bug that
// only the eps-dominated cases expose.
import { readFileSync, writeFileSync } from "node:fs";

function parseArgs(argv) {
  const opts = { bug: null, out: null, files: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--bug") opts.bug = argv[++i];
    else if (argv[i] === "-o") opts.out = argv[++i];
    else opts.files.push(argv[i]);
  }
  if (!opts.out || opts.files.length === 0 || (opts.bug && opts.bug !== "eps-placement")) {
    console.error("usage: node golden_consumer.mjs [--bug eps-placement] -o OUT CASES...");
    process.exit(2);
  }
  return opts;
}

const SPECIAL = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };
const decode = (x) => (typeof x === "string" ? SPECIAL[x] : x);
const encodeValue = (x) => (Number.isFinite(x) ? x : Number.isNaN(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
const rounding = (dtype) => (dtype === "float32" ? Math.fround : (x) => x);

function toArray(obj) {
  return Float64Array.from(obj.data, decode);
}

function encodeArray(values, dtype, shape) {
  return { dtype, shape, data: Array.from(values, encodeValue) };
}

// torch's lerp(start, end, weight), as npoptim evaluates it, in the case's dtype
function lerp(r, start, end, weight) {
  if (Math.abs(weight) < 0.5) return r(start + r(weight * r(end - start)));
  return r(end - r(r(end - start) * r(1 - weight)));
}

// ------------------------------------------------------------------------------------ Adam
function adamStep(c, state, p, g, lr, bug) {
  const r = rounding(c.dtype);
  const h = c.hyperparameters;
  const [beta1, beta2] = h.betas;
  const wd = h.weight_decay;
  const decoupled = Boolean(h.decoupled_weight_decay);
  state.step += 1;
  const t = state.step;
  // scalars are computed in float64, then rounded to the dtype (as torch passes them)
  const decay = r(decoupled && wd !== 0 ? 1 - lr * wd : 1);
  const l2 = r(decoupled ? 0 : wd);
  const oneMinusBeta1 = r(1 - beta1);
  const b2 = r(beta2);
  const oneMinusBeta2 = r(1 - beta2);
  const bc2Sqrt = r(Math.sqrt(1 - beta2 ** t));
  const eps = r(h.eps);
  const negStep = r(-(lr / (1 - beta1 ** t)));
  for (let i = 0; i < p.length; i++) {
    let gi = h.maximize ? -g[i] : g[i];
    let pi = r(p[i] * decay);
    if (l2 !== 0) gi = r(gi + r(l2 * pi));
    const m = lerp(r, state.exp_avg[i], gi, oneMinusBeta1);
    const v = r(r(state.exp_avg_sq[i] * b2) + r(r(oneMinusBeta2 * gi) * gi));
    let vHat = v;
    if (h.amsgrad) {
      vHat = Math.max(state.max_exp_avg_sq[i], v);
      state.max_exp_avg_sq[i] = vHat;
    }
    const denom = bug
      ? r(r(Math.sqrt(vHat) + eps) / bc2Sqrt)   // BUG: eps added before bias correction
      : r(r(Math.sqrt(vHat) / bc2Sqrt) + eps);
    p[i] = r(pi + r(negStep * r(m / denom)));
    state.exp_avg[i] = m;
    state.exp_avg_sq[i] = v;
  }
}

function adamInit(c, p) {
  const s = { step: 0, exp_avg: new Float64Array(p.length), exp_avg_sq: new Float64Array(p.length) };
  if (c.hyperparameters.amsgrad) s.max_exp_avg_sq = new Float64Array(p.length);
  return s;
}

// ------------------------------------------------------------------------------ SparseAdam
// Duplicate (row, column) entries are summed in stored order; every stored entry (explicit
// zeros included) is updated; an empty gradient only advances the step counter.
function coalesce(r, grad) {
  const [rows, cols] = grad.shape;
  const entries = [];
  for (let row = 0; row < rows; row++) {
    const sums = new Map();
    for (let k = grad.indptr[row]; k < grad.indptr[row + 1]; k++) {
      const col = grad.indices[k];
      const value = decode(grad.data[k]);
      sums.set(col, sums.has(col) ? r(sums.get(col) + value) : value);
    }
    for (const col of [...sums.keys()].sort((a, b) => a - b)) entries.push([row * cols + col, sums.get(col)]);
  }
  return entries;
}

function sparseAdamStep(c, state, p, grad, lr, bug) {
  if (grad.format !== "csr") throw new Error(`${c.id}: SparseAdam takes CSR gradients only`);
  const r = rounding(c.dtype);
  const h = c.hyperparameters;
  const [beta1, beta2] = h.betas;
  state.step += 1;
  const t = state.step;
  const entries = coalesce(r, grad);
  if (entries.length === 0) return;
  const bc2Sqrt = Math.sqrt(1 - beta2 ** t);
  const oneMinusBeta1 = r(1 - beta1);
  const oneMinusBeta2 = r(1 - beta2);
  const eps = r(h.eps);
  const negStep = r(-((lr * bc2Sqrt) / (1 - beta1 ** t)));
  const negStepBug = r(-(lr / (1 - beta1 ** t)));
  const bc2SqrtR = r(bc2Sqrt);
  for (const [i, value] of entries) {
    const g = h.maximize ? -value : value;
    const m = r(state.exp_avg[i] + r(r(g - state.exp_avg[i]) * oneMinusBeta1));
    const v = r(state.exp_avg_sq[i] + r(r(r(g * g) - state.exp_avg_sq[i]) * oneMinusBeta2));
    if (bug) p[i] = r(p[i] + r(negStepBug * r(m / r(r(Math.sqrt(v) / bc2SqrtR) + eps))));
    else p[i] = r(p[i] + r(negStep * r(m / r(Math.sqrt(v) + eps))));
    state.exp_avg[i] = m;
    state.exp_avg_sq[i] = v;
  }
}

function sparseAdamInit(c, p) {
  return { step: 0, exp_avg: new Float64Array(p.length), exp_avg_sq: new Float64Array(p.length) };
}

// torch keeps Adam's step as a float32 tensor and SparseAdam's as an int
const OPTIMIZERS = {
  Adam: { init: adamInit, step: adamStep, stepDtype: "float32" },
  SparseAdam: { init: sparseAdamInit, step: sparseAdamStep, stepDtype: "int64" },
};

function runCase(c, bug) {
  const impl = OPTIMIZERS[c.optimizer];
  const params = c.params.map(toArray);
  const states = params.map(() => null);
  const steps = [];
  for (const step of c.steps) {
    step.grads.forEach((grad, i) => {
      if (grad === null) return; // no gradient: nothing changes, not even the step counter
      states[i] ??= impl.init(c, params[i]);
      impl.step(c, states[i], params[i], grad.format === "csr" ? grad : toArray(grad), step.lr, bug);
    });
    steps.push({
      params: params.map((p, i) => encodeArray(p, c.dtype, c.params[i].shape)),
      state: states.map((s, i) => {
        if (s === null) return null;
        const out = { step: { dtype: impl.stepDtype, shape: [], data: [s.step] } };
        for (const name of ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"]) {
          if (s[name]) out[name] = encodeArray(s[name], c.dtype, c.params[i].shape);
        }
        return out;
      }),
    });
  }
  return { id: c.id, steps };
}

const opts = parseArgs(process.argv.slice(2));
const results = [];
for (const file of opts.files) {
  const doc = JSON.parse(readFileSync(file, "utf8"));
  // schema version 2 adds flavor, framework_hyperparameters and tags (absent in version 1)
  if (doc.schema !== "npoptim-golden" || ![1, 2].includes(doc.schema_version) || doc.kind !== "cases") {
    console.error(`${file}: not an npoptim golden case file of schema version 1 or 2`);
    process.exit(2);
  }
  let skipped = 0;
  for (const c of doc.cases) {
    if (!(c.optimizer in OPTIMIZERS)) { skipped++; continue; }
    if ((c.flavor ?? "torch") !== "torch") {  // declared skipped, with the reason (version 2)
      results.push({ id: c.id, skipped: `this example implements torch's conventions, not ${c.flavor}'s` });
      skipped++;
      continue;
    }
    results.push(runCase(c, opts.bug === "eps-placement"));
  }
  console.error(`${file}: ran ${doc.cases.length - skipped} cases` + (skipped ? `, skipped ${skipped}` : ""));
}
const implementation = "examples/node/golden_consumer.mjs" + (opts.bug ? ` (--bug ${opts.bug})` : "");
writeFileSync(opts.out, JSON.stringify({ schema: "npoptim-golden", schema_version: 2, kind: "results", implementation, cases: results }) + "\n");
