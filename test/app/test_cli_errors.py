"""The command line's rule for bad input: one line that names the option or file, exit status 2, before any work
(argparse's own refusals for values out of range and output paths that cannot be written; ``console_main`` for what
the commands find: a file that does not parse, a path that cannot be written). ``PARAPUSH_TRACEBACK=1`` adds the
traceback and keeps the status."""
import pytest

from parapush_ros.cli import console_main


def _refused(capsys, argv, lines: int | None = None) -> str:
    """The error line of a refused command line (argparse: SystemExit(2); our checks: status 2), the only one of
    ``lines`` lines if given."""
    try:
        status = console_main(argv)
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, (argv, err)
    assert err and "Traceback" not in "\n".join(err), err
    assert lines is None or len(err) == lines, err
    return err[-1]


@pytest.mark.parametrize("args, says", [
    (["bench", "physics", "--threads", "-2"], "argument --threads: must be a whole number >= 0, got -2"),
    (["bench", "physics", "--batch", "0"], "argument --batch: must be a whole number >= 1, got 0"),
    (["bench", "speedup", "--horizons", "4", "-3"], "argument --horizons: must be a whole number >= 1, got -3"),
    (["bench", "mpc", "--mismatch", "--spread", "1"], "argument --spread: must be a number >= 0 and < 1, got 1"),
    (["bench", "dgoc", "--k", "0"], "argument --k: must be a whole number >= 1, got 0"),
    (["bench", "calibrate", "--pushes", "-1"], "argument --pushes: must be a whole number >= 1, got -1"),
    (["synth-pushes", "--rate", "0", "--out", "{tmp}/s"], "argument --rate: must be a number > 0, got 0"),
    (["synth-pushes", "--slide-share", "2", "--out", "{tmp}/s"], "argument --slide-share: must be a number >= 0 and "
                                                                 "<= 1, got 2"),
    (["sim", "--duration", "-1"], "argument --duration: must be a number >= 0, got -1"),
    (["train", "--data", "d", "--out", "w.pt", "--learning-curve", "0.5,abc"],
     "argument --learning-curve: 'abc' is not a number"),
    (["train", "--data", "d", "--out", "{tmp}"], "argument --out: {tmp} is a directory (give a file name)"),
    (["bench", "support", "--out", "{tmp}/file.csv"], "argument --out: {tmp}/file.csv is a file, not a directory"),
    (["bench", "support", "--json", "{tmp}/file.csv/x.json"], "argument --json: {tmp}/file.csv is a file, not a "
                                                              "directory"),
])
def test_a_bad_value_is_refused_in_one_line_naming_the_option(tmp_path, capsys, args, says):
    (tmp_path / "file.csv").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    line = _refused(capsys, argv, lines=1)  # argparse's usage block no longer comes first
    prog = "parapush " + " ".join(argv[:2] if argv[0] == "bench" else argv[:1])
    assert line == f"{prog}: error: {says.replace('{tmp}', str(tmp_path))} (see {prog} --help)", line


@pytest.mark.parametrize("args, says", [
    (["bench", "mpc", "--scenes", "abc"], "parapush bench mpc: error: argument --scenes: 'abc' is not a whole number"),
    (["sim", "--coarse", "bogus"], "parapush sim: error: argument --coarse: invalid choice: 'bogus'"),
    (["soak"], "parapush soak: error: the following arguments are required: --minutes"),
    (["bogus"], "parapush: error: argument command: invalid choice: 'bogus'"),
])
def test_argparse_s_own_refusals_are_one_line_too(capsys, args, says):
    assert _refused(capsys, args, lines=1).startswith(says)


def test_input_files_that_do_not_parse_are_named_in_one_line(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    rec = tmp_path / "push.csv"
    rec.write_text("")
    line = _refused(capsys, ["bench", "mpc", "--costs", str(bad), "--scenes", "1", "--out", str(tmp_path)])
    assert line == ("parapush bench mpc: error: bad.yaml: not valid YAML: line 2, column 1: expected ',' or ']', "
                    "but got '<stream end>'")
    line = _refused(capsys, ["replay", "--scene", "box_slider", "--recordings", str(rec), "--mocap-config",
                             str(listing), "--out", str(tmp_path)])
    assert line == f"parapush replay: error: {listing}: not a mocap_ingest parameter file (expected mocap_ingest: " \
                   f"ros__parameters: ...)"
    monkeypatch.setenv("PARAPUSH_TRACEBACK", "1")  # the traceback too, the same status and line
    assert console_main(["bench", "support", "--scene", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith("parapush bench support: error: bad.yaml: not valid YAML: line 2")


def test_a_seeds_only_option_without_seeds_is_refused(capsys):
    """One soak runs in $ROS_DOMAIN_ID on the cores it has: --domain-id was silently ignored."""
    assert _refused(capsys, ["soak", "--minutes", "1", "--domain-id", "5"], lines=1) == \
        "parapush soak: error: --domain-id: only with --seeds"


def test_parapush_sim_names_a_bad_parameter_file_in_one_line_as_the_launch_does(tmp_path, capsys, monkeypatch):
    """``parapush sim --params-file``: a value of another type than the parameter's (``horizon: 4.5`` for an
    integer) ended in a traceback, where the node under ``ros2 launch`` says it in one line; a misspelt key is
    refused before anything starts."""
    monkeypatch.setenv("ROS_DOMAIN_ID", "93")
    typed = tmp_path / "typed.yaml"
    typed.write_text("mpc_planner:\n  ros__parameters:\n    horizon: 4.5\n")
    line = _refused(capsys, ["sim", "--params-file", str(typed), "--duration", "0"])
    assert line.startswith("parapush sim: error: mpc_planner: cannot start: ") and "'horizon'" in line, line
    typo = tmp_path / "typo.yaml"
    typo.write_text("velocity_commander:\n  ros__parameters:\n    max_sped: 0.03\n")
    assert "'max_sped' is not a parameter of velocity_commander (did you mean max_speed?)" in _refused(
        capsys, ["sim", "--params-file", str(typo), "--duration", "0"])
