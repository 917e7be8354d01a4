"""Reports name the machine they were measured on: its CPU model, not just the architecture."""

from __future__ import annotations

import os
import platform

from decoder.machine import cpu_name, machine_info

EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu\n"
ARM = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"


def test_cpu_name_is_the_model_name_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(EPYC * 2)
    assert cpu_name(cpuinfo) == "AMD EPYC 7B13 64-Core Processor"


def test_without_a_model_name_cpu_name_falls_back_to_what_platform_knows(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ARM)
    expected = platform.processor() or platform.machine()
    assert cpu_name(cpuinfo) == expected
    assert cpu_name(tmp_path / "missing") == expected


def test_machine_info_records_the_cpu_cores_and_load():
    info = machine_info()
    assert info["cpu"] == cpu_name() and info["cpu"]
    assert info["cpus"] == os.cpu_count()
    assert info["python"] == platform.python_version()
    if hasattr(os, "getloadavg"):
        assert len(info["load_average"]) == 3 and all(x >= 0 for x in info["load_average"])
