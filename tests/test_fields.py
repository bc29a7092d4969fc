"""The field validators every door uses (envbuild/core/fields.py), on the values people write and
the ones an attacker or a careless user would: Slurm's six time forms read as sbatch reads
them, memory with units, MIG names in NVIDIA's spelling, GPU counts, Docker's reference
grammar, Python names, Kubernetes labels and tolerations."""
from __future__ import annotations

import pytest

from envbuild.core import fields
from envbuild.infra.errors import UserError


def refused(check, *args, **kwargs) -> str:
    with pytest.raises(UserError) as exc:
        check(*args, **kwargs)
    line = exc.value.line()
    assert "\n" not in line and line.isprintable()
    return line


# sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes" and "days-hours:minutes:seconds" (Slurm's sbatch documentation)
@pytest.mark.parametrize("written, seconds, canonical", [
    ("90", 90 * 60, "01:30:00"),  # minutes
    ("30:00", 30 * 60, "00:30:00"),  # minutes:seconds
    ("30:30", 30 * 60 + 30, "00:30:30"),
    ("1:30:00", 90 * 60, "01:30:00"),  # hours:minutes:seconds
    ("60:00:00", 60 * 3600, "2-12:00:00"),
    ("1-00:00:00", 86400, "1-00:00:00"),  # days-hours:minutes:seconds
    ("1-0", 86400, "1-00:00:00"),  # days-hours
    ("4-12", 4 * 86400 + 12 * 3600, "4-12:00:00"),
    ("1-00:30", 86400 + 30 * 60, "1-00:30:00"),  # days-hours:minutes
    ("2-02:30:00", 2 * 86400 + 2 * 3600 + 30 * 60, "2-02:30:00"),
])
def test_slurm_times_are_read_as_sbatch_reads_them(written, seconds, canonical):
    assert fields.slurm_time(written, "--time") == seconds
    assert fields.slurm_time_text(seconds) == canonical
    assert fields.slurm_time(canonical, "--time") == seconds  # what envbuild writes reads back the same


@pytest.mark.parametrize("written", ["0", "00:00", "0-0", "UNLIMITED", "infinite", "-5", "1.5", " 30", "30 ", "1-",
                                     "1:2:3:4", "1:60:00", "99:99", "1-24", "1-00:60", "366-00:00:00", "９０", "1e3",
                                     "01:00:00\n#SBATCH --wrap=id", "", "\u2028"])
def test_malformed_or_unbounded_times_are_refused(written):
    line = refused(fields.slurm_time, written, "--time")
    assert line.startswith("--time: ")


@pytest.mark.parametrize("written, bare, mib", [
    ("16G", "M", 16384), ("16GB", "M", 16384), ("16GiB", "M", 16384), ("16g", "M", 16384), ("512M", "M", 512),
    ("200", "M", 200), ("16", "G", 16384), ("1T", "M", 1024 * 1024), ("4096K", "M", 4), (16, "G", 16384),
])
def test_memory_sizes_with_units(written, bare, mib):
    assert fields.memory_mib(written, "--mem", "memory", bare_unit=bare) == mib


@pytest.mark.parametrize("written", ["-5", "0", "0G", "1M", "0.5G", "16 G B", "16X", "1e9", "16G\nid", True, None, [16],
                                     "99999999999T"])
def test_memory_sizes_that_are_not_sizes_are_refused(written):
    refused(fields.memory_mib, written, "--mem", "memory", bare_unit="G")


def test_memory_is_written_in_each_formats_units():
    assert fields.memory_text(16384, binary_suffix=True) == "16Gi"
    assert fields.memory_text(300, binary_suffix=True) == "300Mi"
    assert fields.memory_text(16384, binary_suffix=False) == "16G"


@pytest.mark.parametrize("written, name", [("1G.10GB", "1g.10gb"), ("3g.40gb", "3g.40gb"), ("MIG 3g.40gb", "3g.40gb"),
                                           ("mig-7g.80gb", "7g.80gb"), ("1g.10gb+me", "1g.10gb+me"),
                                           ("1C.3G.40GB", "1c.3g.40gb"), ("1g.24gb+gfx", "1g.24gb+gfx")])
def test_mig_profiles_take_nvidias_spelling(written, name):
    assert fields.mig_profile(written, "mig") == name


@pytest.mark.parametrize("written", ["3g", "3g.40", "g.40gb", "3g.40gb\n", "3g.40gb; id", "3g_40gb", "full", 3])
def test_malformed_mig_profiles_are_refused(written):
    refused(fields.mig_profile, written, "mig")


@pytest.mark.parametrize("value, count", [(1, 1), ("8", 8), (128, 128)])
def test_gpu_counts(value, count):
    assert fields.gpu_count(value, "--gpus") == count


@pytest.mark.parametrize("value", [0, -1, 129, 10**23, "1e23", 1e23, 1.0, True, False, "٣", "１", "1_0", " 1", None, [1]])
def test_gpu_counts_that_are_not_small_whole_numbers_are_refused(value):
    assert "from 1 to 128" in refused(fields.gpu_count, value, "--gpus")


@pytest.mark.parametrize("ref", ["x:1", "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "127.0.0.1:5555/team/train@sha256:" + "ab" * 32,
                                 "localhost/a/b:c", "registry.example.com:5000/a__b/c--d:v1.0_x", "[::1]:5000/x:y",
                                 "ghcr.io/org/img:tag@sha512:" + "0" * 128])
def test_image_references_by_dockers_grammar(ref):
    assert fields.image_ref(ref, "--image") == ref


@pytest.mark.parametrize("ref", ['x"""\nimport os; os.system("id")\n"""', "x:1; id", "X:1", "x:1 ", "x::1", "x@sha256:zz",
                                 "-x:1", "x/:1", "x:" + "t" * 129, "a/" + "b" * 254 + ":1", "x:1\u2028", "$(id):1",
                                 "x:1'", "x:1\\"])
def test_image_references_outside_the_grammar_are_refused(ref):
    refused(fields.image_ref, ref, "--image")


def test_a_repository_name_may_have_255_characters_and_no_more():
    name = "r/" + "a" * 253
    assert fields.image_ref(name + ":1", "--image") == name + ":1"
    assert "at most 255" in refused(fields.image_ref, name + "a:1", "--image")


@pytest.mark.parametrize("name", ["class", "import", "1job", "None", "lambda", "job-x", "ünï", ""])
def test_python_names_refuse_keywords_and_non_identifiers(name):
    refused(fields.python_identifier, name, "--name", "the task name")


def test_python_names_refuse_the_modules_own_names():
    assert "would hide" in refused(fields.python_identifier, "subprocess", "--name", "the task name", taken=("subprocess",))
    assert fields.python_identifier("train_job", "--name", "the task name", taken=("subprocess",)) == "train_job"


def test_node_selectors_are_labels_with_one_value():
    selector = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "pool": "gpu", "empty": ""}
    assert fields.node_selector(selector, "f:1") == selector
    for bad in ({"pool": ["a", "b"]}, {"pool": {"a": 1}}, {"pool": None}, {"bad key!": "x"}, {"pool": "a b"},
                {"pool": "x\ny"}, {"a/b/c": "x"}, {"pool": "-x"}, ["pool=gpu"], "pool=gpu"):
        refused(fields.node_selector, bad, "f:1")


def test_tolerations_are_checked_as_the_api_server_checks_them():
    ok = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
          {"operator": "Exists"}, {"key": "x", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "30"}]
    assert fields.tolerations(ok, "f:1")[2]["tolerationSeconds"] == 30
    for bad in ([5], ["dedicated"], [["a"]], {"key": "a"}, [{"key": "a", "operator": "In"}], [{"value": "x"}],
                [{"key": "a", "operator": "Exists", "value": "x"}], [{"key": "a", "effect": "Never"}],
                [{"key": "a", "tolerationSeconds": 5}], [{"key": "a", "effect": "NoExecute", "tolerationSeconds": True}],
                [{"key": "a\nb"}], [{"key": "a", "extra": 1}]):
        refused(fields.tolerations, bad, "f:1")


@pytest.mark.parametrize("command, argv", [
    ("python train.py --lr 0.1", ("python", "train.py", "--lr", "0.1")),
    ("sh -c 'echo $HOME; id'", ("sh", "-c", "echo $HOME; id")),
    ("printf '%s\\n' \"it's\"", ("printf", "%s\\n", "it's")),
])
def test_commands_are_split_as_a_shell_splits_them(command, argv):
    assert fields.command_argv(command, "--command") == argv


@pytest.mark.parametrize("command", ['echo "x', "echo 'x", "echo x\\", "python\ntrain.py", "   ", "a\x00b"])
def test_commands_a_shell_could_not_split_are_refused(command):
    assert refused(fields.command_argv, command, "--command").startswith("--command: ")


@pytest.mark.parametrize("check, good, bad", [
    (fields.slurm_partitions, ["gpu", "gpu,gpu-long", "a100_80"], ["gpu\nid", "gpu;id", "gpu id", "$(id)", ",gpu", "-p"]),
    (fields.gres_type, ["v100", "1g.10gb", "a100_80gb"], ["v100:2", "a,b", "v100\n", "`id`"]),
])
def test_slurm_names(check, good, bad):
    for value in good:
        assert check(value, "f:1") == value
    for value in bad:
        refused(check, value, "f:1")
