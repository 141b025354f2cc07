"""Kernel names as reports show them (report/names.py): demangled, shortened one way."""

import json
from pathlib import Path

from pytest_gpuprof.cli.diff import kernel_table
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.report.names import SHORT_WIDTH, full_name, in_metric, short_name

ROOT = Path(__file__).parents[2]


def cutlass_name() -> str:
    """The CUTLASS kernel the CNN's trace (recorded on an H200) names mangled, read from its baseline."""
    entry = json.loads((ROOT / "baselines" / "example_suite" / "test_cnn.json").read_text())
    names = {k for gpus in entry["tests"].values() for e in gpus.values() for k in e["metrics"]["kernels"]
             if k.startswith("_Z")}
    assert len(names) == 1
    return names.pop()


def test_the_real_cutlass_name_is_demangled_and_shortened():
    name = cutlass_name()
    assert len(name) > 1500
    assert name.startswith("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolution")
    full = full_name(name)
    # the mangled form says: function Kernel<ImplicitGemmConvolution<...>> in namespace cutlass__5x_cudnn,
    # returning void (v) and taking the convolution's Params (NT_6ParamsE): T_ is its template argument
    assert full.startswith("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<"
                           "cutlass__5x_cudnn::conv::threadblock::ImplicitGemmMultistage<"
                           "cutlass__5x_cudnn::gemm::GemmShape<64, 64, 64>")
    assert full.endswith(">::Params)") and "_Z" not in full
    assert short_name(name) == "cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<…>>"


def test_a_small_mangled_name_reads_as_cxxfilt_prints_it():
    assert full_name("_Z3addIfEvPT_i") == "void add<float>(float*, int)"  # c++filt's output
    assert short_name("_Z3addIfEvPT_i") == "add<float>"
    assert full_name("plain_kernel_name") == "plain_kernel_name"


def test_the_deepest_lists_fold_first_and_only_as_far_as_needed():
    name = "void ns::k<A<B<C>>, D>(int)"
    assert short_name(name) == "ns::k<A<B<C>>, D>"  # fits: only the return type and parameters go
    # width 14: <C> has one character (folding it saves nothing), so A's list goes
    assert short_name(name, 14) == "ns::k<A<…>, D>"
    # at the last level needed, the longest list first: folding Xx's list is enough
    assert short_name("k<a, Xx<yyyyyyyy>, Z<zz>>", 20) == "k<a, Xx<…>, Z<zz>>"
    # the kernel's own template list never folds: past it the middle is cut
    long = "k<" + ", ".join(f"int{i}" for i in range(60)) + ">"
    cut = short_name(long)
    assert len(cut) == SHORT_WIDTH and cut.startswith("k<int0, int1") and cut.endswith("int58, int59>") and "…" in cut


def test_unbalanced_or_plain_long_names_are_cut_in_the_middle():
    plain = "sm90_xmma_wgrad_" + "x" * 150 + "_execute_split_k_kernel__5x_cudnn"
    cut = short_name(plain)
    assert len(cut) == SHORT_WIDTH and cut.startswith("sm90_xmma_wgrad_") and cut.endswith("split_k_kernel__5x_cudnn")
    assert short_name("bool operator<(int)") == "bool operator<(int)"  # unbalanced: left as it is


def test_per_kernel_metrics_carry_the_name_as_shown():
    assert in_metric("kernels[_Z3addIfEvPT_i].count") == "kernels[add<float>].count"
    assert in_metric("kernels[_Z3addIfEvPT_i].time_us", full_name) == "kernels[void add<float>(float*, int)].time_us"
    assert in_metric("sync_count") == "sync_count"


def test_gpuprof_diff_s_kernel_table_shows_the_short_name():
    name = cutlass_name()
    before = {"step_count": 1, "kernels": {}}
    after = {"step_count": 1, "kernels": {name: {"count": 2, "time_us": 30.0}}}
    lines = kernel_table(before, after, Rules(), 20)
    row = next(line for line in lines if line.lstrip().startswith("new"))
    assert row.endswith(short_name(name)) and "_Z" not in "\n".join(lines)
