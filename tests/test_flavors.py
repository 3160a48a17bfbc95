"""Flavors and convention switches (npoptim/flavors.py): the precedence rule, the framework
constructors, refusals, and that torch's flavor is untouched by the switches.

The switches are checked against the frameworks themselves in tests/test_framework_replay.py;
here each switch is checked against its one-line formula, written out in NumPy."""
import numpy as np
import pytest

import npoptim
from npoptim import flavors, registry


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


def test_keras_defaults_and_explicit_keywords_win():
    opt = npoptim.Adam([np.zeros(2)], flavor="keras")
    assert opt.defaults["eps"] == 1e-7 and opt.defaults["eps_mode"] == "eps_hat"
    assert opt.defaults["decoupled_weight_decay"] is True
    opt = npoptim.Adam([np.zeros(2)], flavor="keras", eps=1e-3, eps_mode="torch")
    assert opt.defaults["eps"] == 1e-3 and opt.defaults["eps_mode"] == "torch"
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
    with pytest.raises(ValueError, match="decoupled"):
        npoptim.SGD([np.zeros(2)], flavor="keras", weight_decay=0.1)
    with pytest.raises(ValueError, match="eps_root"):
        flavors.from_framework("optax", "adam", [np.zeros(2)], learning_rate=0.1, eps_root=1e-8)
    with pytest.raises(ValueError, match="has no NAdam"):
        npoptim.NAdam([np.zeros(2)], flavor="keras")
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
