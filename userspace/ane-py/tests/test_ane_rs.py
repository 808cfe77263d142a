# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""ane_rs against numpy, on the host engine model and on an ane accel node
(see conftest.py)."""

import warnings

import numpy as np
import pytest

import ane_rs
from conftest import has_ane_node


def ints(shape, seed, lo=-8, hi=9):
    """fp16 small integers: every sum and product below is exact in fp16,
    so numpy's result is the bit-exact expectation."""
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.float16)


def same(a, b):
    assert a.dtype == np.float16 and a.shape == b.shape, (a.dtype, a.shape, b.shape)
    assert np.array_equal(a.view(np.uint16), b.astype(np.float16).view(np.uint16)), (a, b)


# --- predict on real compiled programs -------------------------------------


@pytest.mark.parametrize("name", ["sum.anec", "tinygrad_sum.hwx"])
def test_add(dev, fixture, name):
    m = dev.load(fixture(name))
    assert [t.shape for t in m.inputs] == [(1, 64, 1, 1)] * 2
    a, b = ints((1, 64, 1, 1), 1), ints((1, 64, 1, 1), 2)
    (out,) = m.predict([a, b])
    same(out, a + b)


@pytest.mark.parametrize("name", ["mul_zin541_macos12.hwx", "mul_zin764_macos14.hwx"])
def test_mul(dev, fixture, name):
    m = dev.load(fixture(name))
    a, b = ints((1, 64, 1, 1), 3), ints((1, 64, 1, 1), 4)
    (out,) = m.predict([a, b])
    same(out, a * b)


@pytest.mark.parametrize("name", ["relu.anec", "tinygrad_relu.hwx"])
def test_relu(dev, fixture, name):
    m = dev.load(fixture(name))
    x = ints((1, 1, 1, 77), 5)
    (out,) = m.predict([x])
    same(out, np.maximum(x, np.float16(0)))


@pytest.mark.parametrize(
    "name,weight", [("conv.anec", 2), ("tinygrad_conv.hwx", 2), ("tinygrad_conv3_w3.hwx", 3)]
)
def test_conv1x1_constant_weights(dev, fixture, name, weight):
    m = dev.load(fixture(name))
    x = ints((1, 3, 1, 1), 6)
    (out,) = m.predict([x])
    w = np.full((3, 3), weight, np.float32)
    same(out, (w @ x.reshape(3).astype(np.float32)).reshape(1, 3, 1, 1))


def test_concat(dev, fixture):
    m = dev.load(fixture("tinygrad_concat.hwx"))
    # The inputs come in the order the compiler declared them (input_0,
    # then input_1), which is the order of the concatenation; not by slot
    # (input_1 is slot 5, input_0 slot 6).
    assert [t.name for t in m.inputs] == ["input_0", "input_1"]
    big, small = (ints(t.shape, 7 + i) for i, t in enumerate(m.inputs))
    assert small.shape == (1, 16, 1, 1) and big.shape == (1, 16384, 1, 1)
    (out,) = m.predict([big, small])
    same(out, np.concatenate([big, small], axis=1))


def test_sigmoid_lut(dev, fixture):
    m = dev.load(fixture("tinygrad_sigmoid.hwx"))
    x = np.linspace(-6, 6, 77, dtype=np.float16).reshape(1, 1, 1, 77)
    (out,) = m.predict([x])
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    # A piecewise-linear lookup table, not an exact function.
    np.testing.assert_allclose(out.astype(np.float64), want, atol=4e-3)


def test_dict_inputs_and_metadata(dev, fixture):
    path = fixture("tinygrad_sum.hwx")
    m = ane_rs.model(path, device=dev)
    assert m.format == "hwx" and len(m.sha256) == 64 and m.device.kind == dev.kind
    names = [t.name for t in m.inputs]
    a, b = ints((1, 64, 1, 1), 8), ints((1, 64, 1, 1), 9)
    (out,) = m.predict({names[1]: b, names[0]: a})
    same(out, a + b)
    assert all(t.direction == "output" for t in m.outputs)
    assert {n for (_, _, _, n) in m.bindings} >= set(names)


def test_non_contiguous_input(dev, fixture):
    m = dev.load(fixture("relu.anec"))
    x = ints((1, 1, 77, 2), 10)[:, :, :, 0].reshape(1, 1, 1, 77)
    y = np.asfortranarray(ints((1, 1, 1, 77), 11))
    same(m.predict([x])[0], np.maximum(x, np.float16(0)))
    same(m.predict([y])[0], np.maximum(y, np.float16(0)))


# --- resident buffers and chained programs ----------------------------------


def two_sums(dev, fixture, seeds):
    """Two sum programs, the first's output buffer bound as the second's
    input0 (no copy between them), with inputs a, b (first) and c."""
    first = dev.load(fixture("sum.anec"))
    second = dev.load(fixture("sum.anec"))
    a, b, c = (ints((1, 64, 1, 1), s, -4, 5) for s in seeds)
    second.bind("input0", first.buffer("output0"))
    first.write("input0", a)
    first.write("input1", b)
    second.write("input1", c)
    return first, second, a, b, c


def test_chain_two_programs_through_one_buffer(dev, fixture):
    first, second, a, b, c = two_sums(dev, fixture, (12, 13, 14))
    assert first.run() >= 0 and second.run() >= 0
    same(first.read("output0"), a + b)
    same(second.read("output0"), a + b + c)
    # Resident: run again with one input changed.
    second.write("input1", a)
    second.run()
    same(second.read("output0"), a + b + a)


def test_run_chain_is_one_job(dev, fixture):
    first, second, a, b, c = two_sums(dev, fixture, (21, 22, 23))
    # On a device one chained EXEC: second reads what first wrote.
    assert ane_rs.run_chain([first, second]) >= 0
    same(first.read("output0"), a + b)
    same(second.read("output0"), a + b + c)
    # A model may appear twice (its run lock is taken once).
    first.write("input1", c)
    ane_rs.run_chain([first, second, second])
    same(second.read("output0"), a + c + c)


def test_run_chain_bad_inputs(dev, fixture):
    with pytest.raises(ane_rs.InputError, match="models: empty"):
        ane_rs.run_chain([])
    m = dev.load(fixture("sum.anec"))
    other = ane_rs.Device.model() if dev.kind == "device" else None
    if other is not None:
        o = other.load(fixture("sum.anec"))
        with pytest.raises(ane_rs.InputError, match=r"models\[1\]: on another device"):
            ane_rs.run_chain([m, o])
    with pytest.raises(TypeError):
        ane_rs.run_chain([m, "sum.anec"])


def test_buffer_raw_access(dev):
    buf = dev.buffer(64)
    # The model's host memory is what was asked for and has no device
    # address; the driver rounds a BO up to whole pages and maps it.
    if dev.kind == "model":
        assert buf.size == 64 and buf.iova is None
    else:
        assert buf.size >= 64 and buf.size % 4096 == 0 and buf.iova is not None
    buf.write(b"\x01\x02", offset=10)
    assert buf.read()[10:12] == b"\x01\x02"
    with pytest.raises(ane_rs.InputError, match="do not fit"):
        buf.write(b"x" * 8, offset=buf.size - 4)


def test_bind_checks_size(dev, fixture):
    m = dev.load(fixture("sum.anec"))
    small = dev.buffer(16)  # 16 bytes on the model, one page on a device
    with pytest.raises(
        ane_rs.InputError, match=rf"bind\('input0'\): buffer size {small.size}, the slot needs 16384 bytes"
    ):
        m.bind("input0", small)


# --- the parity cells -------------------------------------------------------


def test_parity_cells_all_exact(dev):
    cells = ane_rs.parity(dev)
    assert len(cells) >= 7
    for c in cells:
        assert c["error"] is None, c
        assert c["verdict"] == "exact", c
        assert c["elements"] > 0 and c["executor"] == dev.kind


# --- bad inputs raise, naming the field --------------------------------------


@pytest.fixture
def summ(dev, fixture):
    return dev.load(fixture("sum.anec"))


def test_wrong_dtype(summ):
    a = np.zeros((1, 64, 1, 1), np.float32)
    with pytest.raises(ane_rs.InputError, match=r"inputs\[0\] \(slot 5 'input0'\): dtype float32"):
        summ.predict([a, a.astype(np.float16)])


def test_not_an_array(summ):
    with pytest.raises(ane_rs.InputError, match=r"inputs\[1\].*type list"):
        summ.predict([np.zeros((1, 64, 1, 1), np.float16), [0.0] * 64])


def test_wrong_shape(summ):
    good = np.zeros((1, 64, 1, 1), np.float16)
    with pytest.raises(ane_rs.InputError, match=r"inputs\[1\] .*'input1'.*shape \[64\], expected \[1, 64, 1, 1\]"):
        summ.predict([good, np.zeros(64, np.float16)])


def test_wrong_count(summ):
    good = np.zeros((1, 64, 1, 1), np.float16)
    with pytest.raises(ane_rs.InputError, match="1 arrays given, the program takes 2"):
        summ.predict([good])
    with pytest.raises(ane_rs.InputError, match="expected a list of numpy arrays"):
        summ.predict(good)


def test_wrong_names(summ):
    good = np.zeros((1, 64, 1, 1), np.float16)
    with pytest.raises(ane_rs.InputError, match="no array for input 'input1'"):
        summ.predict({"input0": good})
    with pytest.raises(ane_rs.InputError, match="no tensor named 'x'"):
        summ.predict({"x": good, "input0": good, "input1": good})
    with pytest.raises(ane_rs.InputError, match="'output0' is an output"):
        summ.predict({"output0": good})


def test_bad_program_files(dev, tmp_path):
    with pytest.raises(ane_rs.AneError, match="cannot read program"):
        dev.load(tmp_path / "missing.anec")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a program at all")
    with pytest.raises(ane_rs.AneError, match="not an HWX file"):
        dev.load(junk)
    assert issubclass(ane_rs.InputError, ane_rs.AneError)


# --- devices and discovery ---------------------------------------------------


def test_discovery_on_an_empty_root(tmp_path):
    assert ane_rs.accel_nodes(str(tmp_path)) == []
    info = ane_rs.system_info(str(tmp_path))
    assert isinstance(info, dict) and info["accel_nodes"] == []


@pytest.mark.skipif(has_ane_node(), reason="this machine has an accel node of the ane driver")
def test_no_device_fails_loudly_and_the_model_is_opt_in(fixture):
    path = fixture("relu.anec")
    with pytest.raises(ane_rs.NoDeviceError, match="no accel node of the ane driver"):
        ane_rs.Device()
    # The engine is the default: no silent fallback to the CPU, and the
    # error says how to ask for the model.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for load in (ane_rs.model, ane_rs.Model):
            with pytest.raises(ane_rs.NoDeviceError, match='pass device="model"'):
                load(path)
        with pytest.raises(ane_rs.NoDeviceError):
            ane_rs.parity()
        m = ane_rs.Model(path, device="model")
    assert m.device.kind == "model"


# --- the API as users spell it ----------------------------------------------


def test_exceptions_are_classes_of_ane_rs():
    from ane_rs import AneError, InputError, NoDeviceError, NotSupportedError

    for cls in (AneError, InputError, NoDeviceError, NotSupportedError):
        assert cls.__module__ == "ane_rs", cls
        assert getattr(ane_rs, cls.__name__) is cls
        assert f"{cls.__module__}.{cls.__qualname__}" == f"ane_rs.{cls.__name__}"
    assert issubclass(AneError, Exception)
    for cls in (InputError, NoDeviceError, NotSupportedError):
        assert issubclass(cls, AneError)
    try:
        ane_rs.Device.model().buffer(8).write(b"x" * 9)
    except ane_rs.InputError as e:
        assert type(e) is InputError
        assert repr(e).startswith("InputError(")
        assert "_native" not in f"{type(e).__module__}.{type(e).__name__}"
    else:
        pytest.fail("no InputError")


def test_model_constructor_spellings(fixture):
    path = fixture("relu.anec")
    x = ints((1, 1, 1, 77), 20)
    want = np.maximum(x, np.float16(0))
    for m in (
        ane_rs.Model(path, device="model"),
        ane_rs.Model(str(path), "model"),
        ane_rs.Model(path, device=ane_rs.host_model()),
        ane_rs.model(path, device="model"),
        ane_rs.host_model().load(path),
    ):
        assert isinstance(m, ane_rs.Model) and m.device.kind == "model"
        same(m.predict([x])[0], want)
    # eiln's model(path, dev_id): a clear error naming the argument.
    for bad in (0, "gpu", 1.5):
        with pytest.raises(ane_rs.InputError, match=r"^device: "):
            ane_rs.Model(path, device=bad)
        with pytest.raises(ane_rs.InputError, match=r"^device: "):
            ane_rs.model(path, bad)
    with pytest.raises(ane_rs.InputError, match=r"^device: "):
        ane_rs.parity("gpu")


def test_one_model_from_many_threads(dev, fixture):
    from concurrent.futures import ThreadPoolExecutor

    m = dev.load(fixture("tinygrad_sum.hwx"))

    def work(seed):
        a, b = ints((1, 64, 1, 1), seed), ints((1, 64, 1, 1), seed + 1000)
        for _ in range(10):
            (out,) = m.predict([a, b])
            same(out, a + b)
        # Loading and running on the same device from this thread too.
        own = ane_rs.Model(fixture("relu.anec"), device=dev)
        x = ints((1, 1, 1, 77), seed)
        same(own.predict([x])[0], np.maximum(x, np.float16(0)))
        return seed

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert sorted(pool.map(work, range(12))) == list(range(12))
    # Buffers cross threads as well.
    buf = dev.buffer(64)
    with ThreadPoolExecutor(max_workers=2) as pool:
        pool.submit(buf.write, b"\x07" * 4, 8).result()
    assert buf.read()[8:12] == b"\x07" * 4


def anec_with(path, tmp_path, name, edit):
    """``path`` (an .anec whose payload, one TD, starts at 0x1000) with
    ``edit(bytearray, td_offset)`` applied."""
    b = bytearray(path.read_bytes())
    edit(b, 0x1000)
    out = tmp_path / name
    out.write_bytes(bytes(b))
    return out


def test_program_the_model_refuses(fixture, tmp_path):
    def td_skip(b, td):
        b[td + 4 * 6 + 1] |= 0x02  # W6 bit 9: TDSkip

    path = anec_with(fixture("relu.anec"), tmp_path, "skip.anec", td_skip)
    m = ane_rs.Model(path, device="model")
    with pytest.raises(
        ane_rs.NotSupportedError,
        match=r"^program not supported by the model: TD 0: the engine model does not support TD skip",
    ):
        m.predict([ints((1, 1, 1, 77), 21)])


def test_header_role_corrections_are_reported(fixture, tmp_path):
    # relu.anec with its descriptor reading slot 4 and writing slot 5: the
    # header still calls slot 4 the output. The loader takes the roles from
    # the descriptors, as ane-probe does, and says so.
    def swap_slots(b, td):
        w8 = int.from_bytes(b[td + 32 : td + 36], "little")
        for shift in (0, 6, 12, 18):  # RBase0, RBase1, WBase, TBase
            v = (w8 >> shift) & 0x1F
            if v in (4, 5):
                w8 = (w8 & ~(0x1F << shift)) | ((9 - v) << shift)
        b[td + 32 : td + 36] = w8.to_bytes(4, "little")

    path = anec_with(fixture("relu.anec"), tmp_path, "roles.anec", swap_slots)
    with pytest.warns(UserWarning) as rec:
        m = ane_rs.Model(path, device="model")
    said = [str(r.message) for r in rec]
    assert len(m.notes) == 2 and len(said) == 2, (m.notes, said)
    assert m.notes[0].startswith("slot 4: the header makes it an output")
    assert m.notes[1].startswith("slot 5: the header makes it an input")
    assert said == [f"{path}: {n}" for n in m.notes]
    assert [(t.slot, t.direction) for t in m.inputs + m.outputs] == [(4, "input"), (5, "output")]
    x = ints((1, 1, 1, 77), 22)
    same(m.predict([x])[0], np.maximum(x, np.float16(0)))
    # A program without corrections has none, and warns nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ane_rs.Model(fixture("relu.anec"), device="model").notes == []


def test_model_device_has_no_node():
    d = ane_rs.Device.model()
    assert d.kind == "model" and d.path is None and d.query() is None
    assert repr(d) == "Device.model()"
