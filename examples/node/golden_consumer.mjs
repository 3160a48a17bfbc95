#!/usr/bin/env node
// A minimal consumer of npoptim's golden files in plain Node.js (no npm packages):
// reads case files, runs its own Adam and SparseAdam over every case, and writes a results
// file (schema "npoptim-golden", kind "results") for `npoptim verify`.
//
//   node golden_consumer.mjs [--bug eps-placement] -o results.json CASES.json [CASES.json ...]
//
// float32 cases are computed in float32: every operation's float64 result is rounded with
// Math.fround, which for + - * / and sqrt gives exactly the IEEE float32 result.
// bfloat16/float16 Adam cases (schema version 3, cases/precision/Adam.json) are computed as
// torch does on 16-bit tensors: in float32, each result rounded to the 16-bit type
// (precision.rounding "per-op") or only the stored values ("fused"); so are the 16-bit
// SparseAdam cases (cases/precision/SparseAdam.json: per-op, CSR gradients in the 16-bit type,
// duplicates summed in it); the other precision modes are declared skipped.
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
// One step's scalars: computed in float64, then rounded by r (as torch passes them); advances
// the step counter.
function adamScalars(c, state, lr, r) {
  const h = c.hyperparameters;
  const [beta1, beta2] = h.betas;
  const wd = h.weight_decay;
  const decoupled = Boolean(h.decoupled_weight_decay);
  state.step += 1;
  const t = state.step;
  return {
    decay: r(decoupled && wd !== 0 ? 1 - lr * wd : 1),
    l2: r(decoupled ? 0 : wd),
    oneMinusBeta1: r(1 - beta1),
    b2: r(beta2),
    oneMinusBeta2: r(1 - beta2),
    bc2Sqrt: r(Math.sqrt(1 - beta2 ** t)),
    eps: r(h.eps),
    negStep: r(-(lr / (1 - beta1 ** t))),
  };
}

function adamStep(c, state, p, g, lr, bug) {
  const r = rounding(c.dtype);
  const h = c.hyperparameters;
  const { decay, l2, oneMinusBeta1, b2, oneMinusBeta2, bc2Sqrt, eps, negStep } = adamScalars(c, state, lr, r);
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

// ---------------------------------------------------------- 16-bit Adam (schema version 3)
// Values of a 16-bit array are stored as the numbers they exactly are: read as they are.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (x) => { f32[0] = x; return u32[0]; };
const fromBits = (u) => { u32[0] = u; return f32[0]; };
const roundHalfEven = (q) => {
  const f = Math.floor(q);
  const d = q - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
};
// a float32 value to the nearest bfloat16 (ties to even): the top half of its bits
function toBfloat16(x) {
  if (Number.isNaN(x)) return NaN;
  const u = bitsOf(x);
  return fromBits(Math.floor((u + 0x7fff + (Math.floor(u / 65536) & 1)) / 65536) * 65536);
}
// a float32 value to the nearest float16 (ties to even; subnormals in steps of 2^-24)
function toFloat16(x) {
  if (!Number.isFinite(x)) return x;
  const a = Math.abs(x);
  if (a >= 65520) return x > 0 ? Infinity : -Infinity;
  const exponent = ((bitsOf(a) >>> 23) & 0xff) - 127;
  const quantum = 2 ** (Math.max(exponent, -14) - 10);
  const r = roundHalfEven(a / quantum) * quantum;
  return x < 0 || Object.is(x, -0) ? -r : r;
}
const f = Math.fround;
// float32 a*b + c rounded once: a*b is exact in float64; rounding the float64 sum to float32
// again differs from one rounding only at an exact float32 midpoint (vanishingly rare)
const fma32 = (a, b, c) => f(a * b + c);
const lerp32 = (start, end, w) => (Math.abs(w) < 0.5 ? fma32(w, f(end - start), start)
  : fma32(f(w - 1), f(end - start), end));

function adam16Step(c, state, p, g, lr) {
  const R = c.dtype === "bfloat16" ? toBfloat16 : toFloat16;
  const perOp = c.precision.rounding === "per-op";
  const h = c.hyperparameters;
  // scalars in float32; per-op rounds add()'s alpha (the L2 weight) and the eps added to a
  // tensor to 16 bits, as torch does
  const { decay, l2: l2f, oneMinusBeta1, b2, oneMinusBeta2, bc2Sqrt, eps: epsf, negStep } = adamScalars(c, state, lr, f);
  const l2 = perOp ? R(l2f) : l2f;
  const eps = perOp ? R(epsf) : epsf;
  for (let i = 0; i < p.length; i++) {
    let gi = h.maximize ? -g[i] : g[i];
    let m, v, vHat, pi;
    if (perOp) {  // torch's single-tensor path: every tensor op rounded
      pi = R(f(p[i] * decay));
      if (l2 !== 0) gi = R(fma32(l2, pi, gi));
      m = R(lerp32(state.exp_avg[i], gi, oneMinusBeta1));
      v = R(f(state.exp_avg_sq[i] * b2));
      v = R(fma32(f(oneMinusBeta2 * gi), gi, v));
      vHat = h.amsgrad ? Math.max(state.max_exp_avg_sq[i], v) : v;
      let denom = R(f(Math.sqrt(vHat)));
      denom = R(f(denom / bc2Sqrt));
      denom = R(f(denom + eps));
      p[i] = R(f(pi + f(f(negStep * m) / denom)));
    } else {  // fused=True: float32 throughout, the stored values rounded once
      if (l2 !== 0) gi = fma32(p[i], l2, gi);
      pi = f(p[i] * decay);
      m = lerp32(state.exp_avg[i], gi, oneMinusBeta1);
      v = fma32(f(oneMinusBeta2 * gi), gi, f(state.exp_avg_sq[i] * b2));
      vHat = h.amsgrad ? Math.max(state.max_exp_avg_sq[i], v) : v;
      const denom = f(f(Math.sqrt(vHat) / bc2Sqrt) + eps);
      p[i] = R(f(pi + f(f(negStep * m) / denom)));
      m = R(m);
      v = R(v);
      vHat = R(vHat);
    }
    state.exp_avg[i] = m;
    state.exp_avg_sq[i] = v;
    if (h.amsgrad) state.max_exp_avg_sq[i] = vHat;
  }
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
  // r rounds each tensor operation's result, s the scalars: on 16-bit tensors (per-op, torch's
  // only SparseAdam path) each result is the float32 one rounded to the 16-bit type, the
  // scalars 1 - beta and the step size are float32 and eps is rounded to the 16-bit type
  const R = { bfloat16: toBfloat16, float16: toFloat16 }[c.dtype];
  const r = R ? (x) => R(f(x)) : rounding(c.dtype);
  const s = R ? f : r;
  const h = c.hyperparameters;
  const [beta1, beta2] = h.betas;
  state.step += 1;
  const t = state.step;
  const entries = coalesce(r, grad);
  if (entries.length === 0) return;
  const bc2Sqrt = Math.sqrt(1 - beta2 ** t);
  const oneMinusBeta1 = s(1 - beta1);
  const oneMinusBeta2 = s(1 - beta2);
  const eps = r(s(h.eps));
  const negStep = s(-((lr * bc2Sqrt) / (1 - beta1 ** t)));
  const negStepBug = r(-(lr / (1 - beta1 ** t)));
  const bc2SqrtR = r(bc2Sqrt);
  for (const [i, value] of entries) {
    const g = h.maximize ? -value : value;
    const m = r(state.exp_avg[i] + r(r(g - state.exp_avg[i]) * oneMinusBeta1));
    const v = r(state.exp_avg_sq[i] + r(r(r(g * g) - state.exp_avg_sq[i]) * oneMinusBeta2));
    if (bug) p[i] = r(p[i] + r(negStepBug * r(m / r(r(Math.sqrt(v) / bc2SqrtR) + eps))));
    else p[i] = r(p[i] + r(negStep * r(m / r(r(Math.sqrt(v)) + eps))));
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
  const impl = c.precision && c.optimizer === "Adam" ? { ...OPTIMIZERS.Adam, step: adam16Step } : OPTIMIZERS[c.optimizer];
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
  // schema version 3 adds the bfloat16/float16 dtypes and the precision object
  // schema version 4 adds the wrappers (Lookahead, SAM, Mechanic: a case's "wrapped" optimizer)
  if (doc.schema !== "npoptim-golden" || ![1, 2, 3, 4].includes(doc.schema_version) || doc.kind !== "cases") {
    console.error(`${file}: not an npoptim golden case file of schema version 1 to 4`);
    process.exit(2);
  }
  let skipped = 0;
  for (const c of doc.cases) {
    if (c.wrapped) {  // declared skipped, with the reason (version 4)
      results.push({ id: c.id, skipped: `this example has no optimizer wrappers (${c.optimizer} around ${c.wrapped.optimizer})` });
      skipped++;
      continue;
    }
    if (!(c.optimizer in OPTIMIZERS)) { skipped++; continue; }
    if ((c.flavor ?? "torch") !== "torch") {  // declared skipped, with the reason (version 2)
      results.push({ id: c.id, skipped: `this example implements torch's conventions, not ${c.flavor}'s` });
      skipped++;
      continue;
    }
    const p = c.precision;
    if (p && (p.rounding === "stochastic" || p.master_weights || p.kahan || p.quantization
              || (c.optimizer === "SparseAdam" && p.rounding !== "per-op"))) {
      results.push({ id: c.id, skipped: "this example implements 16-bit Adam in per-op and fused rounding and 16-bit SparseAdam (per-op) only (no quantized state)" });
      skipped++;
      continue;
    }
    results.push(runCase(c, opts.bug === "eps-placement"));
  }
  console.error(`${file}: ran ${doc.cases.length - skipped} cases` + (skipped ? `, skipped ${skipped}` : ""));
}
const implementation = "examples/node/golden_consumer.mjs" + (opts.bug ? ` (--bug ${opts.bug})` : "");
const half = results.some((r) => (r.steps ?? []).some((s) => s.params.some((a) => a.dtype === "bfloat16" || a.dtype === "float16")));
writeFileSync(opts.out, JSON.stringify({ schema: "npoptim-golden", schema_version: half ? 3 : 2, kind: "results", implementation, cases: results }) + "\n");
