"""Every rank prints long lines in many small pieces: under a pipe, mpiexec alone would
deliver them cut and mixed. The launcher must forward each line whole."""
import sys

import teachgrad.distributed as dist

dist.init_process_group("mpi")
rank = dist.get_rank()
for i in range(200):
    for piece in range(40):
        sys.stdout.write(f"r{rank}-{i}-{piece};")
        if piece % 7 == 0:
            sys.stdout.flush()
    sys.stdout.write("\n")
sys.stdout.write(f"rank {rank} unfinished last line")
