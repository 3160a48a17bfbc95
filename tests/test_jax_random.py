"""npoptim.kernels.jax_random against jax.random 0.10.2 itself (jax_enable_x64, its default
threefry2x32 with jax_threefry_partitionable): keys, split, fold_in and bits bit for bit,
uniform, erfinv, log1p and normal bit for bit in float32 and float64 (XLA's CPU formulas with
their fma, see npoptim.kernels.jax_random); the Threefry-2x32-20 known-answer vectors of
Random123 without jax."""
import numpy as np
import pytest

from npoptim.kernels import jax_random as jr

SEEDS = (0, 2 ** 31 - 1, 2 ** 40 + 3)


def test_threefry_known_answers():
    # Random123's kat_vectors for threefry2x32_20: (key, counter) -> output
    for key, counter, expected in (
            ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
            ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
            ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))):
        y0, y1 = jr.threefry2x32(np.array(key, np.uint32), np.array([counter[0]], np.uint32),
                                 np.array([counter[1]], np.uint32))
        assert (int(y0[0]), int(y1[0])) == expected


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.mark.needs("jax")
def test_keys_split_fold_in_and_bits_are_jax_bit_for_bit(jax):
    import jax.numpy as jnp
    for seed in SEEDS:
        k = jax.random.key(seed)
        ours = jr.key(seed)
        np.testing.assert_array_equal(jr.key(seed), np.asarray(jax.random.key_data(k)))
        for num in (2, 5):
            np.testing.assert_array_equal(jr.split(ours, num),
                                          np.asarray(jax.random.key_data(
                                              jax.random.split(k, num))))
        np.testing.assert_array_equal(jr.fold_in(ours, 2 ** 32 - 5), np.asarray(
            jax.random.key_data(jax.random.fold_in(k, 2 ** 32 - 5))))
        for width, dtype in ((32, jnp.uint32), (64, jnp.uint64)):
            np.testing.assert_array_equal(jr.random_bits(ours, width, (3, 1, 5)),
                                          np.asarray(jax.random.bits(k, (3, 1, 5), dtype)))


@pytest.mark.needs("jax")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_uniform_and_normal_bit_for_bit(jax, dtype):
    n = 30_000
    k = jax.random.key(5)
    lo = np.nextafter(dtype(-1), dtype(0))
    np.testing.assert_array_equal(jr.uniform(jr.key(5), (n,), dtype),
                                  np.asarray(jax.random.uniform(k, (n,), dtype)))
    np.testing.assert_array_equal(jr.uniform(jr.key(5), (n,), dtype, lo, 1.0),
                                  np.asarray(jax.random.uniform(k, (n,), dtype, lo, 1.0)))
    actual = jr.normal(jr.key(5), (n,), dtype)
    assert actual.dtype == dtype
    np.testing.assert_array_equal(actual, np.asarray(jax.random.normal(k, (n,), dtype)))
    # both log1p branches, the far tails (w >= 16 in float64), |u| = 1 -> inf, and log1p's
    # own edges
    x = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.logspace(-16, -3, 200),
                        [1 - 2.0 ** -52, -(1 - 2.0 ** -40), 0.0]]).astype(dtype)
    np.testing.assert_array_equal(jr.erfinv(x), np.asarray(jax.lax.erf_inv(x)))
    a = -(x * x)
    np.testing.assert_array_equal(jr.log1p(a), np.asarray(jax.numpy.log1p(a)))


def test_bad_arguments_raise():
    for seed in (-1, 2 ** 63, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            jr.key(seed)
    with pytest.raises(ValueError, match="float32 or float64"):
        jr.normal(jr.key(0), (2,), np.float16)
    with pytest.raises(ValueError, match="bit_width"):
        jr.random_bits(jr.key(0), 16, (2,))
