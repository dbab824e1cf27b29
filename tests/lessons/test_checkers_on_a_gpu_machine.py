"""On a GPU machine the checkers still see a thread that goes past the end of an array.

A GPU checks no bounds: an unguarded learner kernel there reads whatever lies past the
array and writes into memory nobody looks at, and the numbers it leaves can still be
right. So where numba compiles for a GPU, ``launch_on_host_arrays`` (every kernel
checker's launch) first runs the learner's kernel in the simulator, on copies, which
raises ``IndexError`` for it. Run with numba set up for a GPU: the simulated run comes
before anything touches one, so none is needed to see the refusal.
"""


def test_an_unguarded_kernel_is_caught_before_the_gpu_launch(run_as_on_a_gpu_machine):
    run = run_as_on_a_gpu_machine("""
        import numpy as np
        from numba import cuda
        from teachgrad.exercises.core import Mismatch
        from teachgrad.exercises.kernel_runs import launch_on_host_arrays, launch_within_bounds

        @cuda.jit(device=True)
        def double(v):
            return 2 * v

        @cuda.jit
        def unguarded(x, out):  # 8 threads for 5 elements, no `if i < n`
            i = cuda.grid(1)
            out[i] = double(x[i])

        x = np.arange(5.0)
        try:
            launch_on_host_arrays(unguarded, 2, 4, x, np.zeros(5))
        except IndexError as error:
            print("IndexError", "out of bounds for axis 0 with size 5" in str(error))
        try:
            launch_within_bounds(unguarded, 2, 4, x, np.zeros(5), hint="guard with i < n")
        except Mismatch as error:
            print("Mismatch", str(error).startswith("a thread went past the end of an array"))
        try:  # the launch limits are still checked before the simulator starts 2048 threads
            launch_on_host_arrays(unguarded, 1, 2048, x, np.zeros(5))
        except ValueError as error:
            print("ValueError", "over the limit of 1024 threads per block" in str(error))
    """)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.split() == ["IndexError", "True", "Mismatch", "True", "ValueError", "True"]


def test_an_online_softmax_that_indexes_past_acc_is_caught_before_the_gpu_launch(
        run_as_on_a_gpu_machine):
    """Exercise 17.2's checker launches the library's attention kernel around the learner's
    device function: on a GPU machine it runs that launch simulated first as well."""
    run = run_as_on_a_gpu_machine("""
        import sys
        from teachgrad.exercises import ch17

        sys.path.insert(0, "tests/lessons")  # the slip of the simulator's test, as it is there
        from test_exercises_ch17_online_softmax import mixes_keys_and_features

        feedback = ch17.check_online_softmax(mixes_keys_and_features)
        print("RESULT", feedback.passed,
              "a thread went past the end of an array" in feedback.message)
    """)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.split()[-3:] == ["RESULT", "False", "True"], run.stdout


def test_plugging_an_online_softmax_that_indexes_past_acc_is_refused(run_as_on_a_gpu_machine):
    """Plugged, the update runs inside the GPU's attention kernel with nothing checked: on
    a GPU machine, plugging tries it in a small simulated launch first."""
    run = run_as_on_a_gpu_machine("""
        import sys
        import teachgrad as tg
        from teachgrad.exercises import PartError
        from teachgrad.kernels.attention import online_softmax_update

        sys.path.insert(0, "tests/lessons")
        from test_exercises_ch17_online_softmax import mixes_keys_and_features

        try:
            tg.exercises.plug("cuda.online_softmax", mixes_keys_and_features)
        except PartError as error:
            print("PartError", "went past the end of an array" in str(error),
                  "not plugged" in str(error))
        print("plugged", sorted(tg.exercises.plugged_parts()))
        with tg.exercises.plugged("cuda.online_softmax", online_softmax_update):
            print("right", sorted(tg.exercises.plugged_parts()))
    """)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.split() == ["PartError", "True", "True", "plugged", "[]", "right",
                                  "['cuda.online_softmax']"], run.stdout
