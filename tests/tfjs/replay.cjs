// Replays golden cases through TensorFlow.js's own optimizers (tfjs-core 4.22.0 with the
// pure-JS CPU backend, float32), as a tfjs user runs them: tf.train.<name>(...positional
// args), opt.applyGradients({name: gradient}) once per step with every variable named (a
// null gradient: a null entry, as opt.minimize(f, false, varList) passes a variable f does not
// use), the learning rate set per step. A job with "leaveOut": true leaves a variable without
// a gradient out of the map instead: the call path of tfjs's known bug (its state is kept by
// position in the map, tests/data/framework_known_bugs.json).
// Used by tests/test_framework_replay.py, which writes the jobs (cases it can run, with the
// constructor arguments in tfjs's order) and verifies the results with npoptim verify.
//   node tests/tfjs/replay.cjs JOBS.json RESULTS.json   (NPOPTIM_TFJS_DIR: the npm install dir)
"use strict";
const fs = require("fs");
const path = require("path");
const dir = process.env.NPOPTIM_TFJS_DIR;
const tf = require(path.join(dir, "node_modules/@tensorflow/tfjs-core"));
require(path.join(dir, "node_modules/@tensorflow/tfjs-backend-cpu"));

async function main() {
  await tf.setBackend("cpu");
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const results = [];
  for (const job of jobs) {
    const vars = job.params.map((p, i) => tf.variable(tf.tensor(p.data, p.shape, "float32"), true, `${job.id}#${i}`));
    const opt = tf.train[job.ctor](...job.args);
    const steps = [];
    let error = null;
    for (const step of job.steps) {
      if (error === null) {
        if (typeof opt.setLearningRate === "function") opt.setLearningRate(step.lr);  // sgd, momentum
        else opt.learningRate = step.lr;
        const grads = {};  // a missing (null) gradient: a null entry (or, leaveOut, none)
        step.grads.forEach((g, i) => {
          if (g !== null) grads[vars[i].name] = tf.tensor(g, job.params[i].shape, "float32");
          else if (!job.leaveOut) grads[vars[i].name] = null;
        });
        try {
          opt.applyGradients(grads);
        } catch (e) {  // a framework bug (state keyed by position): NaN from this step on
          error = `step ${steps.length + 1}: ${e.message}`;
        }
        Object.values(grads).forEach((g) => g !== null && g.dispose());
      }
      steps.push({ params: vars.map((v) => error === null ? Array.from(v.dataSync())
                                                        : Array(v.size).fill(null)) });
    }
    vars.forEach((v) => v.dispose());
    opt.dispose();
    results.push({ id: job.id, steps, error });
  }
  fs.writeFileSync(process.argv[3], JSON.stringify(results));
}
main().catch((e) => { console.error(e); process.exit(1); });
