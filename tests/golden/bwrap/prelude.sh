env_file=$1; capture=$2; shift 2
options=("${@:2:$1}")
shift "$(($1 + 1))"
if [ "$env_file" != - ]; then
  while IFS= read -r -d '' pair; do
    options+=(--setenv "${pair%%=*}" "${pair#*=}")
  done < "$env_file" || exit 125
fi
for node in /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset /dev/nvidia-caps /dev/dri /dev/kfd; do
  if [ -e "$node" ]; then options+=(--dev-bind "$node" "$node"); fi
done
for file in /etc/shadow /etc/shadow- /etc/gshadow /etc/gshadow- /etc/ssh/ssh_host_*_key; do
  if [ -e "$file" ]; then options+=(--ro-bind /dev/null "$file"); fi
done
for name in CUDA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES GPU_DEVICE_ORDINAL; do
  if [ -n "${!name+set}" ]; then options+=(--setenv "$name" "${!name}"); fi
done
if [ "$capture" != - ]; then options+=(--bind "$PWD" "$capture"); fi
exec bwrap "${options[@]}" -- "$@"
