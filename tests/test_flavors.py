"""Flavors and convention switches (npoptim/flavors.py, npoptim/frameworks/): the precedence
rule, the framework constructors, refusals, and that torch's flavor is untouched by the
switches.

The switches are checked against the frameworks themselves in tests/test_framework_replay.py;
here each switch is checked against its one-line formula, written out in NumPy."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import npoptim
from npoptim import flavors, registry

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(opt_factory, steps=6, seed=0, lrs=None):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(steps)]
    opt = opt_factory([w])
    for t, g in enumerate(grads):
        if lrs:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step([g])
    return w, grads


def test_every_flavor_optimizer_builds_and_records_its_flavor():
    for name, flavor in flavors.FLAVORS.items():
        for optimizer in flavor.switches:
            opt = registry.get(optimizer)([np.zeros((2, 2))], flavor=name)
            assert opt.flavor == name


def test_the_flavored_optimizers_are_the_tables_and_the_decorated_ones():
    """One source for which optimizers take ``flavor=``: FLAVORED (the frameworks' switches)
    names exactly the registry optimizers whose ``__init__`` ``flavored`` wraps."""
    decorated = {name for name in registry.OPTIMIZERS
                 if getattr(registry.get(name).__init__, "takes_flavor", False)}
    assert set(flavors.FLAVORED) == decorated
    assert set(flavors.FLAVORED) == set(flavors.TORCH.switches)  # torch's flavor names them all


def test_flavors_is_reachable_from_the_package_alone():
    """``import npoptim`` then ``npoptim.flavors.from_framework(...)``, as the README writes
    it, in a fresh interpreter (no test module imported npoptim.flavors first)."""
    code = ("import numpy as np, npoptim; "
            "o = npoptim.flavors.from_framework('keras', 'Adam', [np.zeros(2)]); "
            "print(o.flavor, npoptim.frameworks.get('keras').name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.split() == ["keras", "keras"]


def test_keras_defaults_and_explicit_keywords_win():
    opt = npoptim.Adam([np.zeros(2)], flavor="keras")
    assert opt.defaults["eps"] == 1e-7 and opt.defaults["eps_mode"] == "eps_hat"
    assert opt.defaults["decoupled_weight_decay"] is True
    opt = npoptim.Adam([np.zeros(2)], flavor="keras", eps=1e-3, eps_mode="bias_corrected")
    assert opt.defaults["eps"] == 1e-3 and opt.defaults["eps_mode"] == "bias_corrected"
    assert npoptim.AdamW([np.zeros(2)], flavor="keras").defaults["weight_decay"] == 0.004
    assert npoptim.AdamW([np.zeros(2)], flavor="optax").defaults["weight_decay"] == 1e-4


def test_flavor_picks_the_framework_variant_and_an_explicit_variant_wins():
    assert npoptim.LAMB([np.zeros(2)], flavor="keras").variant == "keras3"
    assert npoptim.LAMB([np.zeros(2)], flavor="optax").variant == "paper_v5"
    assert npoptim.LARS([np.zeros(2)], flavor="optax").variant == "optax"
    assert npoptim.LAMB([np.zeros(2)], flavor="keras", variant="apex").variant == "apex"


def test_from_framework_uses_framework_names_and_defaults():
    opt = flavors.from_framework("keras", "Adam", [np.zeros(2)], learning_rate=0.01, beta_2=0.9)
    assert opt.defaults["lr"] == 0.01 and opt.defaults["betas"] == (0.9, 0.9)
    assert opt.defaults["eps"] == 1e-7
    opt = flavors.from_framework("keras", "RMSprop", [np.zeros(2)], rho=0.5)
    assert opt.defaults["alpha"] == 0.5 and opt.defaults["lr_in_momentum"] is True
    opt = flavors.from_framework("optax", "amsgrad", [np.zeros(2)], learning_rate=0.1)
    assert opt.defaults["amsgrad"] and opt.defaults["amsgrad_max"] == "bias_corrected"
    opt = flavors.from_framework("optax", "sgd", [np.zeros(2)], learning_rate=0.1,
                                 momentum=None)
    assert opt.defaults["momentum"] == 0.0
    with pytest.raises(TypeError, match="requires learning_rate"):
        flavors.from_framework("optax", "adam", [np.zeros(2)])
    with pytest.raises(TypeError, match="unknown argument 'betas'"):
        flavors.from_framework("keras", "Adam", [np.zeros(2)], betas=(0.9, 0.9))


@pytest.mark.parametrize("option,value", [("clipnorm", 1.0), ("global_clipnorm", 1.0),
                                          ("use_ema", True), ("gradient_accumulation_steps", 4),
                                          ("loss_scale_factor", 128.0), ("clipvalue", 0.5)])
def test_non_convention_options_are_refused_by_name(option, value):
    with pytest.raises(ValueError, match=f"{option}={value!r} is not a convention"):
        flavors.from_framework("keras", "Adam", [np.zeros(2)], **{option: value})
    # the framework's "off" is accepted
    flavors.from_framework("keras", "Adam", [np.zeros(2)], **{option: None})


def test_unimplemented_conventions_are_refused():
    with pytest.raises(ValueError, match="no dampening"):
        npoptim.SGD([np.zeros(2)], flavor="keras", dampening=0.1)
    with pytest.raises(ValueError, match="eps_root"):
        flavors.from_framework("optax", "adam", [np.zeros(2)], learning_rate=0.1, eps_root=1e-8)
    with pytest.raises(ValueError, match="has no NAdam"):
        npoptim.NAdam([np.zeros(2)], flavor="tfjs")
    with pytest.raises(ValueError, match="unknown flavor"):
        npoptim.Adam([np.zeros(2)], flavor="pytorch")
    with pytest.raises(ValueError, match="eps_mode must be one of"):
        npoptim.Adam([np.zeros(2)], eps_mode="hat")
    with pytest.raises(ValueError, match="no framework combines"):
        npoptim.Adam([np.zeros(2)], eps_mode="eps_hat", amsgrad_max="bias_corrected")
    with pytest.raises(ValueError, match="no dampening"):
        npoptim.SGD([np.zeros(2)], momentum=0.9, dampening=0.1, lr_in_buffer=True)


def test_torch_state_dict_has_torch_keys_only():
    opt = npoptim.Adam([np.zeros(2)])
    assert "eps_mode" not in opt.state_dict()["param_groups"][0]
    keras = npoptim.Adam([np.zeros(2)], flavor="keras")
    assert keras.state_dict()["param_groups"][0]["eps_mode"] == "eps_hat"
    again = npoptim.Adam([np.zeros(2)])
    again.load_state_dict(keras.state_dict())
    assert again.param_groups[0]["eps_mode"] == "eps_hat"


def test_adam_eps_hat_is_its_formula():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 0.1
    w, grads = _run(lambda p: npoptim.Adam(p, lr=lr, eps=eps, eps_mode="eps_hat"))
    ref = np.random.default_rng(0).standard_normal(5)
    m = v = 0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        ref = ref - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("amsgrad_max", [None, "raw", "bias_corrected"])
def test_adam_eps_in_sqrt_is_its_formula(amsgrad_max):
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 0.1
    amsgrad = dict(amsgrad=True, amsgrad_max=amsgrad_max) if amsgrad_max else {}
    w, grads = _run(lambda p: npoptim.Adam(p, lr=lr, eps=eps, eps_mode="in_sqrt", **amsgrad))
    ref = np.random.default_rng(0).standard_normal(5)
    m = v = vmax = 0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if amsgrad_max == "bias_corrected":
            vmax = np.maximum(vmax, v / (1 - b2 ** t))
            v_hat = vmax
        else:
            vmax = np.maximum(vmax, v)
            v_hat = (vmax if amsgrad_max else v) / (1 - b2 ** t)
        ref = ref - lr * (m / (1 - b1 ** t)) / np.sqrt(v_hat + eps)
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)


def test_amsgrad_bias_corrected_max_is_its_formula():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    w, grads = _run(lambda p: npoptim.Adam(p, lr=lr, amsgrad=True, amsgrad_max="bias_corrected"))
    ref = np.random.default_rng(0).standard_normal(5)
    m = v = vmax = 0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v / (1 - b2 ** t))
        ref = ref - lr * (m / (1 - b1 ** t)) / (np.sqrt(vmax) + eps)
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)


def test_rmsprop_and_sgd_lr_inside_the_buffer_differ_from_torch_only_under_a_schedule():
    lrs = [0.1 * (t + 1) for t in range(6)]
    for cls, switch, extra in ((npoptim.SGD, "lr_in_buffer", {}),
                               (npoptim.RMSprop, "lr_in_momentum", {"eps": 0.5})):
        const_in, _ = _run(lambda p: cls(p, lr=0.1, momentum=0.9, **extra, **{switch: True}))
        const_out, _ = _run(lambda p: cls(p, lr=0.1, momentum=0.9, **extra))
        np.testing.assert_allclose(const_in, const_out, rtol=1e-14, atol=1e-15)
        sched_in, _ = _run(lambda p: cls(p, lr=0.1, momentum=0.9, **extra, **{switch: True}),
                           lrs=lrs)
        sched_out, _ = _run(lambda p: cls(p, lr=0.1, momentum=0.9, **extra), lrs=lrs)
        assert np.max(np.abs(sched_in - sched_out)) > 1e-3


def test_adagrad_eps_in_sqrt_zero_accumulator_gives_zero_update():
    w = np.ones(3)
    opt = npoptim.Adagrad([w], lr=0.1, eps=0.0, eps_in_sqrt=True)
    opt.step([np.array([0.0, 1.0, 0.0])])
    np.testing.assert_array_equal(w, [1.0, 0.9, 1.0])
    w = np.ones(3)
    opt = npoptim.Adagrad([w], lr=0.1, eps=1e-2, initial_accumulator_value=0.1,
                          eps_in_sqrt=True)
    opt.step([np.array([0.5, 1.0, 0.0])])
    np.testing.assert_allclose(w, 1 - 0.1 * np.array([0.5, 1.0, 0.0])
                               / np.sqrt(0.1 + np.array([0.25, 1.0, 0.0]) + 1e-2), rtol=1e-15)


def test_adamax_eps_added_is_its_formula():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 0.3
    w, grads = _run(lambda p: npoptim.Adamax(p, lr=lr, eps=eps, eps_mode="added"))
    ref = np.random.default_rng(0).standard_normal(5)
    m = u = 0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g))
        ref = ref - lr / (1 - b1 ** t) * m / (u + eps)
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)


def test_global_step_ages_a_skipped_parameter_and_is_its_formula():
    """step_scope="global": a None gradient leaves the values and moments alone but the step
    count advances, so the next gradient is bias-corrected with the optimizer's count."""
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(4), None, None, rng.standard_normal(4)]
    for scope, ts in (("per_param", (1, 2)), ("global", (1, 4))):
        w, never = np.ones(4), np.ones(2)
        opt = npoptim.Adam([w, never], lr=lr, step_scope=scope)
        for g in grads:
            opt.step([g, None])
        ref, m, v = np.ones(4), 0, 0
        for t, g in zip(ts, (grads[0], grads[3])):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            ref = ref - lr / (1 - b1 ** t) * m / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)
        assert opt.state[0]["step"] == ts[-1]
        # a parameter that never had a gradient: untouched; globally it has zero state, aged
        np.testing.assert_array_equal(never, 1.0)
        if scope == "global":
            assert opt.state[1]["step"] == 4 and not opt.state[1]["exp_avg"].any()
        else:
            assert 1 not in opt.state


def test_step_scope_comes_from_the_flavor_and_an_explicit_keyword_wins():
    assert npoptim.Adam([np.zeros(2)]).step_scope == "per_param"
    assert npoptim.Adam([np.zeros(2)], flavor="keras").step_scope == "global"
    assert npoptim.Adamax([np.zeros(2)], flavor="tfjs").step_scope == "global"
    assert npoptim.Adam([np.zeros(2)], flavor="optax").step_scope == "per_param"
    assert npoptim.Adam([np.zeros(2)], flavor="keras",
                        step_scope="per_param").step_scope == "per_param"
    with pytest.raises(ValueError, match="step_scope must be one of"):
        npoptim.Adam([np.zeros(2)], step_scope="iterations")
    # optimizers without a step count are not changed by it
    w = np.ones(2)
    opt = npoptim.SGD([w, np.ones(1)], lr=0.1, momentum=0.9, step_scope="global")
    opt.step([np.ones(2), None])
    assert list(opt.state) == [0]


def test_nadam_keras_is_torch_with_momentum_decay_one_and_a_parameter_dtype_product():
    opt = flavors.from_framework("keras", "Nadam", [np.zeros(2)], weight_decay=0.01)
    d = opt.defaults
    assert (d["momentum_decay"], d["decoupled_weight_decay"], d["state_dtype"], d["eps"],
            d["lr"], d["weight_decay"]) == (1.0, True, "param", 1e-7, 1e-3, 0.01)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-3
    w, grads = _run(lambda p: npoptim.NAdam(p, lr=lr, eps=eps, flavor="keras"))
    ref = np.random.default_rng(0).standard_normal(5)
    m = v = 0
    prod = 1.0
    for t, g in enumerate(grads, 1):  # Keras's Nadam.update_step, written out
        u, u_next = b1 * (1 - 0.5 * 0.96 ** t), b1 * (1 - 0.5 * 0.96 ** (t + 1))
        prod *= u
        m = m + (g - m) * (1 - b1)
        v = v + (g * g - v) * (1 - b2)
        m_hat = u_next * m / (1 - prod * u_next) + (1 - u) * g / (1 - prod)
        ref = ref - m_hat * lr / (np.sqrt(v / (1 - b2 ** t)) + eps)
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)
    # torch keeps mu_product in float32 whatever the parameter's dtype
    torch_like = npoptim.NAdam([np.zeros(2)])
    torch_like.step([np.ones(2)])
    assert torch_like.state[0]["mu_product"].dtype == np.float32
    opt = npoptim.NAdam([np.zeros(2)], state_dtype="param")
    opt.step([np.ones(2)])
    assert opt.state[0]["mu_product"].dtype == np.float64
    assert "state_dtype" not in torch_like.state_dict()["param_groups"][0]
    with pytest.raises(ValueError, match="state_dtype must be one of"):
        npoptim.NAdam([np.zeros(2)], state_dtype="float16")


def test_nadam_global_step_ages_the_momentum_product():
    w, skipped = np.ones(2), np.ones(2)
    opt = npoptim.NAdam([w, skipped], step_scope="global", state_dtype="param")
    for _ in range(3):
        opt.step([np.ones(2), None])
    assert opt.state[1]["step"] == 3
    assert opt.state[1]["mu_product"] == opt.state[0]["mu_product"]


@pytest.mark.parametrize("name", ["SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax"])
def test_keras_decays_every_optimizer_decoupled_before_its_rule(name):
    """Keras's base optimizer: w -= w*wd*lr, then the rule without L2 (npoptim: the switch
    decoupled_weight_decay, applied by the base class); the torch flavor keeps L2."""
    cls = registry.get(name)
    lr, wd = 0.05, 0.3
    extra = {"momentum": 0.9} if name == "SGD" else {}  # plain SGD: L2 = decoupled
    keras, _ = _run(lambda p: cls(p, lr=lr, weight_decay=wd, flavor="keras", **extra))
    rng = np.random.default_rng(0)
    w = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(6)]
    by_hand = cls([w], lr=lr, flavor="keras", **extra)
    for g in grads:
        w *= 1 - lr * wd
        by_hand.step([g])
    np.testing.assert_allclose(keras, w, rtol=1e-14, atol=1e-15)
    torch_like, _ = _run(lambda p: cls(p, lr=lr, weight_decay=wd, **extra))
    assert np.max(np.abs(torch_like - keras)) > 1e-4
    assert flavors.from_framework("keras", name, [np.zeros(2)], weight_decay=wd).defaults[
        "decoupled_weight_decay"] is True


def test_onnx_post_update_decay_is_its_formula():
    """ONNX Adam's norm_coefficient_post: X_final = (1 - c) X_new, not scaled by lr."""
    lr, b1, b2, eps, c = 0.01, 0.9, 0.999, 1e-8, 0.05
    w, grads = _run(lambda p: flavors.from_framework("onnx", "Adam", p, R=lr, epsilon=eps,
                                                     norm_coefficient_post=c))
    ref = np.random.default_rng(0).standard_normal(5)
    m = v = 0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        ref = (1 - c) * (ref - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps))
    np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)
    assert "post_weight_decay" not in npoptim.Adam([np.zeros(2)]).state_dict()["param_groups"][0]
    with pytest.raises(ValueError, match="post_weight_decay"):
        npoptim.Adam([np.zeros(2)], post_weight_decay=-0.1)


def test_onnxruntime_adamw_is_its_formula():
    """onnxruntime-training's AdamW (AdamWOptimizer adam_mode=1, orttraining/.../adamw/adamw.cc
    AdamWComputeMode1): lr_corrected = lr sqrt(b2)/b1, x <- x - lr_corrected m/(sqrt(v)+eps),
    then x <- x - lr wd x on the updated x; correct_bias=0 sets b1 = b2 = 1."""
    b1, b2, eps, wd = 0.9, 0.999, 1e-6, 0.1
    lrs = [0.01, 0.02, 0.005, 0.01, 0.03, 0.001]  # the decay is scaled by each step's lr
    for correct_bias in (True, False):
        w, grads = _run(lambda p: flavors.from_framework(
            "onnx", "AdamW", p, learning_rate=0.01, weight_decay=wd,
            bias_correction=correct_bias), lrs=lrs)
        ref = np.random.default_rng(0).standard_normal(5)
        m = v = 0
        for t, (g, lr) in enumerate(zip(grads, lrs), 1):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            lr_corrected = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) if correct_bias else lr
            ref = ref - lr_corrected * m / (np.sqrt(v) + eps)
            ref = ref - lr * wd * ref
        np.testing.assert_allclose(w, ref, rtol=1e-13, atol=1e-14)
        torch_form, _ = _run(lambda p: npoptim.AdamW(p, lr=0.01, eps=eps, weight_decay=wd),
                             lrs=lrs)
        assert np.max(np.abs(torch_form - w)) > 1e-6
    opt = npoptim.AdamW([np.zeros(2)], flavor="onnx")
    assert (opt.defaults["eps"], opt.defaults["weight_decay"]) == (1e-6, 0.0)
    assert opt.defaults["decay_after_update"] and opt.defaults["eps_mode"] == "eps_hat"
    with pytest.raises(ValueError, match="decoupled_weight_decay=True"):
        npoptim.Adam([np.zeros(2)], weight_decay=0.1, decay_after_update=True)
    with pytest.raises(ValueError, match="bias_correction must be True or False"):
        npoptim.AdamW([np.zeros(2)], bias_correction=0)
    assert "bias_correction" not in npoptim.AdamW([np.zeros(2)]).state_dict()["param_groups"][0]


def test_conventions_outside_the_rule_are_refused_where_they_are_not_defined():
    """step_scope="global" only where the aging is known (the flavored optimizers); the
    float optimizers' decay outside the rule is not rounded as the 16-bit kernels round."""
    with pytest.raises(ValueError, match="per-parameter step counts only"):
        npoptim.ASGD([np.zeros(2)]).step_scope = "global"
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from npoptim import precision
    w = np.zeros(2, ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="not implemented for 16-bit"):
        precision.SGD([w], weight_decay=0.1, decoupled_weight_decay=True)
    with pytest.raises(ValueError, match="not implemented for 16-bit"):
        precision.Adam([w], post_weight_decay=0.1)
    with pytest.raises(ValueError, match="not implemented for 16-bit"):
        precision.AdamW([w], bias_correction=False)
    with pytest.raises(ValueError, match="per-parameter step counts only"):
        precision.Adam([w], step_scope="global")


def test_optax_noisy_constructors_take_the_jax_stream_and_their_key():
    opt = flavors.from_framework("optax", "noisy_sgd", [np.zeros(2)], learning_rate=1e-2,
                                 key=9)
    assert (opt.defaults["noise_stream"], opt.defaults["seed"]) == ("jax", 9)
    opt = flavors.from_framework("optax", "contrib.dpsgd", [np.zeros(2)], learning_rate=1e-2,
                                 l2_norm_clip=1.0, noise_multiplier=0.5, seed=3, momentum=None)
    assert (opt.defaults["noise_stream"], opt.defaults["seed"], opt.defaults["momentum"]) == (
        "jax", 3, 0.0)


@pytest.mark.needs("optax", "jax")
def test_optax_noisy_sgd_key_none_is_0_seed_is_the_key_and_key_arrays_name_their_seed():
    # optax 0.2.8: key=None is key 0 (with a warning); the deprecated seed= is the key, and
    # both is refused; an integer key outside jax's int64 seeds is refused with jax's range
    # (not the counter stream's); raw key data (which optax refuses too) names its seed
    def seed(**kw):
        return flavors.from_framework("optax", "noisy_sgd", [np.zeros(2)], learning_rate=1e-2,
                                      **kw).defaults["seed"]
    assert seed() == seed(key=None) == 0
    assert seed(seed=5) == seed(key=5, seed=None) == seed(key=np.array(5)) == 5
    assert npoptim.NoisySGD([np.zeros(2)], flavor="optax").defaults["seed"] == 0
    with pytest.raises(ValueError, match="only one of seed"):
        seed(key=1, seed=2)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*63\)"):
        seed(key=2 ** 63)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*63\)"):
        npoptim.DPSGD([np.zeros(2)], seed=2 ** 63, noise_stream="jax")
    with pytest.raises(ValueError, match=r"raw key data.*pass key=4294967301"):
        seed(key=np.array([1, 5], np.uint32))
    with pytest.raises(ValueError, match="first word is >= 2"):
        seed(key=np.array([2 ** 31, 0], np.uint32))
    with pytest.raises(ValueError, match="integer seed"):
        seed(key=1.5)
    jax = pytest.importorskip("jax")
    with pytest.raises(ValueError, match="typed jax key"):
        seed(key=jax.random.key(0))


def test_optax_radam_sets_the_eps_and_threshold_switches_and_refuses_other_thresholds():
    opt = flavors.from_framework("optax", "radam", [np.zeros(2)], learning_rate=1e-2)
    group = opt.param_groups[0]
    assert (group["eps_mode"], group["rectify_threshold_inclusive"]) == ("bias_corrected", True)
    assert (group["lr"], group["betas"], group["eps"]) == (1e-2, (0.9, 0.999), 1e-8)
    with pytest.raises(ValueError, match="threshold=4.0"):
        flavors.from_framework("optax", "radam", [np.zeros(2)], learning_rate=1e-2,
                               threshold=4.0)


def test_optax_nadam_and_nadamw_are_nadam_without_the_momentum_schedule():
    nadam = flavors.from_framework("optax", "nadam", [np.zeros(2)], learning_rate=1e-2)
    nadamw = flavors.from_framework("optax", "nadamw", [np.zeros(2)], learning_rate=1e-2)
    for opt in (nadam, nadamw):
        group = opt.param_groups[0]
        assert (group["momentum_schedule"], group["state_dtype"]) == ("none", "param")
    assert nadam.param_groups[0]["weight_decay"] == 0.0
    assert (nadamw.param_groups[0]["weight_decay"],
            nadamw.param_groups[0]["decoupled_weight_decay"]) == (1e-4, True)
    with pytest.raises(ValueError, match="nesterov=False"):
        flavors.from_framework("optax", "nadam", [np.zeros(2)], learning_rate=1e-2,
                               nesterov=False)


def test_none_without_a_framework_twin_and_optax_warmup_are_refused():
    """npoptim's AdaBelief eps_root=None (= eps) is no optax number; optax's schedule-free
    warmup is its variant's (not mapped); None (optax's) is npoptim's 0 warmup."""
    with pytest.raises(ValueError, match="eps_root=None"):
        flavors.from_framework("optax", "adabelief", [np.zeros(2)], learning_rate=1e-2,
                               eps_root=None)
    with pytest.raises(ValueError, match="warmup_steps=5"):
        flavors.from_framework("optax", "contrib.schedule_free_sgd", [np.zeros(2)],
                               warmup_steps=5)
    opt = flavors.from_framework("optax", "contrib.schedule_free_adamw", [np.zeros(2)])
    assert opt.defaults["warmup_steps"] == 0 and opt.defaults["lr"] == 0.0025
    assert flavors.framework_names("optax", "ScheduleFreeSGD",
                                   dict(lr=1.0, warmup_steps=0))["warmup_steps"] is None
    assert flavors.from_framework("optax", "adan", [np.zeros(2)],
                                  learning_rate=1e-2).defaults["betas"] == (0.98, 0.92, 0.99)


OPTAX_CONTRIB = ("contrib.acprop", "contrib.cocob", "contrib.dog", "contrib.dowg",
                 "contrib.momo", "contrib.momo_adam", "contrib.sophia", "contrib.galore")
#: optax's constructors with a random key (npoptim's jax stream), checked the same way
OPTAX_KEYED = ("noisy_sgd", "contrib.dpsgd")


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("name", OPTAX_CONTRIB + OPTAX_KEYED)
def test_optax_contrib_constructors_have_optax_names_and_defaults(name):
    """Each keyword of the table is one of optax's, with optax 0.2.8's default (sophia's
    hessian_diagonal_fn is named by its estimate: optax's default is Hutchinson's; noisy_sgd's
    deprecated seed is an alias of its key)."""
    import functools
    import inspect
    optax = pytest.importorskip("optax")
    signature = inspect.signature(functools.reduce(getattr, name.split("."), optax))
    entry = flavors.get("optax").constructors[name]
    assert set(entry.defaults) <= set(signature.parameters), name
    assert set(entry.names) | set(entry.unsupported) | set(entry.aliases) <= set(entry.defaults)
    for key, value in entry.defaults.items():
        default = signature.parameters[key].default
        if value is flavors.REQUIRED:
            assert default is inspect.Parameter.empty, key
        elif key == "hessian_diagonal_fn":
            assert value == "hutchinson" and "hutchinson" in repr(default)
        else:
            assert value == default, (key, value, default)


def test_optax_contrib_constructors_give_npoptim_the_same_optimizer():
    w = [np.zeros(2)]
    momo = flavors.from_framework("optax", "contrib.momo", w, weight_decay=0.1)
    assert (momo.variant, momo.param_groups[0]["weight_decay_form"]) == ("optax", "optax")
    assert npoptim.MomoAdam(w, flavor="optax").param_groups[0]["weight_decay_form"] == "optax"
    dog = flavors.from_framework("optax", "contrib.dog", w, init_step=("distance", 0.1))
    assert (dog.param_groups[0]["weight_decay"], dog.param_groups[0]["init_step"]) == (
        0.0, ("distance", 0.1))   # optax's weight_decay None is 0
    acprop = flavors.from_framework("optax", "contrib.acprop", w, learning_rate=0.1, b1=0.8)
    assert acprop.param_groups[0]["betas"] == (0.8, 0.999)
    with pytest.raises(TypeError, match="requires learning_rate"):
        flavors.from_framework("optax", "contrib.acprop", w)
    with pytest.raises(ValueError, match="mask"):
        flavors.from_framework("optax", "contrib.cocob", w, mask=lambda p: p)


def test_optax_sophia_names_its_hessian_estimate_and_keeps_clip_threshold_none():
    w = [np.zeros(2)]
    group = flavors.from_framework("optax", "contrib.sophia", w, learning_rate=1e-2,
                                   clip_threshold=None,
                                   hessian_diagonal_fn="squared-gradient").param_groups[0]
    assert (group["clip_threshold"], group["hessian_estimate"]) == (None, "squared-gradient")
    group = flavors.from_framework("optax", "contrib.sophia", w,
                                   learning_rate=1e-2).param_groups[0]
    assert (group["hessian_estimate"], group["weight_decay"]) == ("caller", 1e-4)
    with pytest.raises(ValueError, match="name the estimate"):
        flavors.from_framework("optax", "contrib.sophia", w, learning_rate=1e-2,
                               hessian_diagonal_fn=object())
    with pytest.raises(ValueError, match="takes a number"):   # not every None is a value
        flavors.from_framework("optax", "contrib.sophia", w, learning_rate=1e-2, gamma=None)
    entry = flavors.get("optax").constructors["contrib.sophia"]
    assert flavors.framework_call(entry, dict(hessian_estimate="caller"))[
        "hessian_diagonal_fn"] == "hutchinson"


def _optax_adam_eps_root(name, **extra):
    """optax's ``adam``/``amsgrad``/``adamw`` with ``eps=0`` and ``eps_root``, through
    from_framework, and the parameters after 24 steps of the standard problem."""
    import optax_compare
    params, grads = optax_compare.problem(seed=7)
    live = [p.copy() for p in params]
    opt = flavors.from_framework("optax", name, live, learning_rate=0.05, eps=0.0,
                                 eps_root=1e-3, **extra)
    assert opt.defaults["eps_mode"] == "in_sqrt" and opt.defaults["eps"] == 1e-3
    return params, grads, optax_compare.npoptim_trajectory(opt, live, grads)


def test_optax_eps_root_is_eps_inside_the_root_by_hand():
    """optax: ``mu_hat / (sqrt(nu_hat + eps_root) + eps)``; with eps = 0, written out here in
    NumPy for three steps of one element."""
    w = np.array([0.5, -1.0, 2.0])
    opt = flavors.from_framework("optax", "adam", [w], learning_rate=0.1, eps=0.0,
                                 eps_root=1e-3)
    expected, m, v = w.copy(), 0.0, 0.0
    for t, g in enumerate((np.array([0.3, -0.2, 0.1]), np.array([-0.1, 0.4, 0.05]),
                           np.array([0.2, 0.2, -0.3])), start=1):
        opt.step([g])
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        expected = expected - 0.1 * (m / (1 - 0.9 ** t)) / np.sqrt(v / (1 - 0.999 ** t) + 1e-3)
        np.testing.assert_allclose(w, expected, rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match="not both; pass eps=0.0"):  # optax's default eps
        flavors.from_framework("optax", "adam", [np.zeros(2)], learning_rate=0.1,
                               eps_root=1e-8)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("name", ["adam", "amsgrad", "adamw"])
def test_optax_eps_root_matches_optax(name):
    import optax
    import optax_compare
    params, grads, ours = _optax_adam_eps_root(name)
    make = getattr(optax, name)
    theirs = optax_compare.optax_trajectory(
        lambda: make(learning_rate=0.05, eps=0.0, eps_root=1e-3), params, grads)
    optax_compare.assert_same_trajectory(ours, theirs)


# ------------------------------------------- the flavor files, run as a framework's user reads them
def _flavor_cases():
    from pathlib import Path
    from npoptim.golden.schema import load
    root = Path(__file__).resolve().parents[1] / "reference_results" / "cases"
    return [c for p in sorted(root.glob("*/*.json")) for c in load(p, "cases").cases
            if c.flavor in flavors.FLAVORS and c.flavor != "torch"]


def _call_in_comment(case):
    """The constructor (the flavor table's name) that the case's comment names in its
    ``Framework call: <call>(**framework_hyperparameters).`` sentence."""
    import re
    found = re.findall(r"Framework call: ([\w.]+)\(\*\*framework_hyperparameters\)\.",
                       case.comment)
    assert len(found) == 1, f"{case.id}: its comment names no framework call: {case.comment!r}"
    flavor = flavors.get(case.flavor)
    names = [n for n, e in flavor.constructors.items()
             if (e.call or f"{flavor.call_prefix}{n}") == found[0]]
    assert names, f"{case.id}: {found[0]} is no constructor of the {case.flavor} table"
    return names[0]


def test_every_flavor_case_builds_from_its_file_alone():
    """Each flavor case names its framework constructor, and that constructor called with the
    case's ``framework_hyperparameters`` (their JSON types: no switch, no npoptim name) is the
    case's optimizer with the case's own hyperparameters: nothing the case holds is missing
    from the call (optax's decoupled NAdam is optax.nadamw with its weight_decay)."""
    from npoptim.golden import codec, flavor_cases, generate
    cases = _flavor_cases()
    assert len(cases) > 150
    for case in cases:
        name = _call_in_comment(case)
        assert flavors.get(case.flavor).constructors[name].npoptim == case.optimizer, case.id
        built = flavors.from_framework(case.flavor, name, flavor_cases.probe(),
                                       **case.framework_hyperparameters)
        got = codec.from_json_hyper(generate.hyperparameters(built))
        want = codec.from_json_hyper(case.hyperparameters)
        assert got == want, (case.id, name, {k: (got.get(k), want.get(k))
                                             for k in set(got) | set(want)
                                             if got.get(k) != want.get(k)})


def test_the_constructor_is_the_one_that_writes_the_hyperparameters():
    optax = flavors.get("optax")
    nadam = dict(betas=(0.9, 0.999), eps=1e-8, lr=0.02, weight_decay=0.1,
                 decoupled_weight_decay=True)
    assert optax.constructor_name_for("NAdam", nadam) == "nadamw"
    assert optax.constructor_name_for("NAdam", dict(nadam, weight_decay=0.0,
                                                    decoupled_weight_decay=False)) == "nadam"
    assert optax.constructor_name_for("Adam", dict(lr=0.01, amsgrad=True)) == "amsgrad"
    assert optax.constructor_name_for("Adam", dict(lr=0.01, amsgrad=False)) == "adam"
    assert flavors.framework_names("optax", "NAdam", nadam)["weight_decay"] == 0.1


@pytest.mark.needs("onnx")
def test_onnx_defaults_are_the_schema_s():
    """The onnx table's defaults are the onnx 1.23 schema's (epsilon 1e-6 for Adam and
    Adagrad, not 0), and no flavor case is labelled defaults that is not built from them."""
    onnx = flavors.get("onnx")
    assert onnx.constructors["Adam"].defaults["epsilon"] == 1e-6
    assert onnx.constructors["Adagrad"].defaults["epsilon"] == 1e-6
    assert npoptim.Adagrad([np.zeros(2)], flavor="onnx").defaults["eps"] == 1e-6
    schema = pytest.importorskip("onnx").defs
    for name in ("Adam", "Adagrad"):
        attributes = schema.get_schema(name, domain="ai.onnx.preview.training").attributes
        for key, value in onnx.constructors[name].defaults.items():
            if key in attributes and attributes[key].default_value.type:
                assert float(np.float32(value)) == attributes[key].default_value.f, (name, key)


def test_every_defaults_case_is_the_framework_s_defaults():
    from npoptim.golden import codec, flavor_cases, generate
    for case in _flavor_cases():
        if "/defaults/" not in case.id:
            continue
        cls = registry.get(case.optimizer)
        lr = {"lr": case.hyperparameters["lr"]} if flavor_cases._required_lr(
            case.flavor, case.optimizer, next(r for r in flavor_cases.cases.TABLE[case.optimizer]
                                              if r.name == "defaults")) else {}
        own = generate.hyperparameters(cls(flavor_cases.probe(), flavor=case.flavor, **lr))
        assert codec.from_json_hyper(own) == codec.from_json_hyper(case.hyperparameters), case.id


@pytest.mark.needs("onnx")
def test_onnx_cases_name_the_domain_their_operator_is_in():
    """An onnx case calls ai.onnx.preview.training.<Op> only where that domain has the
    operator (onnx 1.23: Adam, Adagrad, Momentum); AdamW is onnxruntime-training's."""
    schema = pytest.importorskip("onnx").defs
    cases = [c for c in _flavor_cases() if c.flavor == "onnx"]
    assert {c.optimizer for c in cases} >= {"Adam", "AdamW"}
    for case in cases:
        name = _call_in_comment(case)
        in_domain = schema.has(name, "ai.onnx.preview.training")
        assert in_domain == (flavors.get("onnx").constructors[name].call == ""), case.id
        if not in_domain:
            assert "onnxruntime-training" in case.comment and "no AdamW" in case.comment
