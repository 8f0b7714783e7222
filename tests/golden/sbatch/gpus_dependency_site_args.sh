#!/bin/bash
#SBATCH --job-name=vibesys-0123abcd-bench-2
#SBATCH --no-requeue
#SBATCH --gres=gpu:2
#SBATCH --time=120
#SBATCH --partition=main,priority
#SBATCH --output=/shared/vibesys/0123abcd/2/stdout
#SBATCH --error=/shared/vibesys/0123abcd/2/stderr
#SBATCH --chdir=/shared/projects/kernel
#SBATCH --account=lab
#SBATCH --qos=normal
#SBATCH --dependency=afterok:22
#SBATCH --kill-on-invalid-dep=yes
# Written by vibesys. exit_code is the command's own status (128+N for signal N),
# written atomically after it ends; started is written before it begins.
run_dir=/shared/vibesys/0123abcd/2
printf 'host=%s\nstarted_at=%s\nslurm_job_id=%s\n' "$(uname -n)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-}" > "$run_dir/started.tmp" && mv "$run_dir/started.tmp" "$run_dir/started"
./bench --iterations=10
rc=$?
printf '%s\n' "$rc" > "$run_dir/exit_code.tmp" && mv "$run_dir/exit_code.tmp" "$run_dir/exit_code"
exit "$rc"
