#!/bin/bash
#SBATCH --job-name=vibesys-odd-1
#SBATCH --no-requeue
#SBATCH --time=5
#SBATCH --output=/shared/vibesys/odd/1/stdout
#SBATCH --error=/shared/vibesys/odd/1/stderr
#SBATCH --chdir=/shared/vibesys/odd/1
# Written by vibesys. exit_code is the command's own status (128+N for signal N),
# written atomically after it ends; started is written before it begins.
run_dir=/shared/vibesys/odd/1
printf 'host=%s\nstarted_at=%s\nslurm_job_id=%s\n' "$(uname -n)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-}" > "$run_dir/started.tmp" && mv "$run_dir/started.tmp" "$run_dir/started"
'A=1' 'it'"'"'s' '$(rm -rf /)' '`id`' 'two words' 'line
break' '$HOME' ''
rc=$?
printf '%s\n' "$rc" > "$run_dir/exit_code.tmp" && mv "$run_dir/exit_code.tmp" "$run_dir/exit_code"
exit "$rc"
