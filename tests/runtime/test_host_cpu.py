"""The CPU features a model runtime compares a library's against, read without LLVM."""

from tecomp.runtime import host_cpu

X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2
"""

AARCH64_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp asimddp
CPU implementer\t: 0x41
"""


def test_the_flags_of_the_first_processor_are_read():
    flags = host_cpu._parse_cpuinfo(X86_CPUINFO)
    assert {"avx2", "sse4_2", "pni", "bmi1"} <= flags and "sysret_ss_attrs" not in flags
    assert {"asimd", "asimddp", "atomics"} <= host_cpu._parse_cpuinfo(AARCH64_CPUINFO)
    assert host_cpu._parse_cpuinfo("processor\t: 0\n") == frozenset()


def test_features_are_compared_under_the_names_the_kernel_lists():
    flags = host_cpu._parse_cpuinfo(X86_CPUINFO)
    # sse4.2 is sse4_2, sse3 is pni, bmi is bmi1: present; the AVX-512 ones are not.
    built = ("sse3", "sse4.2", "bmi", "avx2", "avx512f", "avx512vnni", "fma")
    assert host_cpu.missing_cpu_features(built, "x86_64", flags) == ("avx512f", "avx512vnni")
    arm = host_cpu._parse_cpuinfo(AARCH64_CPUINFO)
    assert host_cpu.missing_cpu_features(("neon", "dotprod", "sve"), "aarch64", arm) == ("sve",)


def test_what_cannot_be_told_is_not_reported_missing():
    flags = host_cpu._parse_cpuinfo(X86_CPUINFO)
    # Features without a flag in the table, a machine without a table, no flags at all.
    assert host_cpu.missing_cpu_features(("cx16", "xsave", "64bit"), "x86_64", flags) == ()
    assert host_cpu.missing_cpu_features(("avx512f",), "riscv64", flags) == ()
    assert host_cpu.missing_cpu_features(("avx512f",), "x86_64", frozenset()) == ()


def test_this_machine_has_the_features_of_its_own_flags():
    flags = host_cpu.cpu_flags()
    assert isinstance(flags, frozenset)
    assert host_cpu.missing_cpu_features(("avx2",) if "avx2" in flags else ()) == ()
