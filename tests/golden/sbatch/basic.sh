#!/bin/bash
#SBATCH --job-name=vibesys-0123abcd-1
#SBATCH --no-requeue
#SBATCH --time=30
#SBATCH --partition=main
#SBATCH --output=/shared/vibesys/0123abcd/1/stdout
#SBATCH --error=/shared/vibesys/0123abcd/1/stderr
#SBATCH --chdir=/shared/vibesys/0123abcd/1
# Written by vibesys. exit_code is the command's own status (128+N for signal N),
# written atomically after it ends; started is written before it begins.
run_dir=/shared/vibesys/0123abcd/1
printf 'host=%s\nstarted_at=%s\nslurm_job_id=%s\n' "$(uname -n)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-}" > "$run_dir/started.tmp" && mv "$run_dir/started.tmp" "$run_dir/started"
python3 eval.py --out results.json
rc=$?
printf '%s\n' "$rc" > "$run_dir/exit_code.tmp" && mv "$run_dir/exit_code.tmp" "$run_dir/exit_code"
exit "$rc"
