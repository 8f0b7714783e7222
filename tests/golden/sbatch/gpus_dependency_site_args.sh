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
#SBATCH --mail-user=ops@example.org
#SBATCH --dependency=afterok:22
#SBATCH --kill-on-invalid-dep=yes
#SBATCH --mail-type=INVALID_DEPEND
# Written by vibesys. The job claims its attempt before the command begins (and runs
# nothing if the attempt is claimed already); exit_code is the command's own status
# (128+N for signal N), written atomically after it ends.
attempt_dir=/shared/vibesys/0123abcd/2
vibesys_claim="$attempt_dir"/claim.$$.tmp
printf 'kind=job\nhost=%s\nstarted_at=%s\nslurm_job_id=%s\nslurm_node=%s\nslurm_partition=%s\nslurm_cpus=%s\n' "$(uname -n)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-}" "${SLURMD_NODENAME:-}" "${SLURM_JOB_PARTITION:-}" "${SLURM_CPUS_ON_NODE:-}" > "$vibesys_claim"
if ! ln "$vibesys_claim" "$attempt_dir"/claim 2>/dev/null; then
  rm -f "$vibesys_claim"
  { echo 'vibesys: this attempt is claimed by someone else; nothing was run'; cat "$attempt_dir"/claim; } > "$attempt_dir"/refused.$$ 2>/dev/null
  mv "$attempt_dir"/refused.$$ "$attempt_dir"/refused 2>/dev/null
  exit 85
fi
rm -f "$vibesys_claim"
./bench --iterations=10
rc=$?
printf '%s\n' "$rc" > "$attempt_dir/exit_code.tmp" && mv "$attempt_dir/exit_code.tmp" "$attempt_dir/exit_code"
exit "$rc"
