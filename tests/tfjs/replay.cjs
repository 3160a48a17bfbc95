// Replays golden cases through TensorFlow.js's own optimizers (tfjs-core 4.22.0 with the
// pure-JS CPU backend, float32), as a tfjs user runs them: tf.train.<name>(...positional
// args), opt.applyGradients({name: gradient}) once per step (a null gradient: the variable is
// left out of the map), the learning rate set per step.
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
        const grads = {};  // a missing (null) gradient: the variable is left out, as tfjs users do
        step.grads.forEach((g, i) => {
          if (g !== null) grads[vars[i].name] = tf.tensor(g, job.params[i].shape, "float32");
        });
        try {
          opt.applyGradients(grads);
        } catch (e) {  // a framework bug (state keyed by position): NaN from this step on
          error = `step ${steps.length + 1}: ${e.message}`;
        }
        Object.values(grads).forEach((g) => g.dispose());
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
