#!/usr/bin/env bash
# The README's GPU figures in one run: the judge in bf16 on CUDA, the same scripts and arguments as the
# CPU rows (plus a GRPO step of a GPU-sized batch). Each script prints its device; a failing script is
# reported and the others still run. Needs a CUDA build of torch, this project with its [trl] extra,
# and SummEval under the data folder ($JUDGE_REWARD_DATA or ../shared/data).
#
#   bash benchmarks/gpu.sh [LOG [NAME...]]   # ~8 min on an H200; everything printed is also written to LOG
#
# NAMEs (throughput, prefix, prefix_fp32, sdpa_agreement, exact_vs_sampling, aspects, aspects_grpo_group,
# grpo_step, grpo_step_large, grpo_step_large_cudnn) run only those rows, in this file's order: device time is short.
set -u
cd "$(dirname "$0")"
log=${1:-../reports/gpu.log}
shift $(( $# > 0 ? 1 : 0 ))
only=" $* "
mkdir -p "$(dirname "$log")"
: >"$log"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
$py -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'error: torch sees no CUDA device')" || exit 2

run() {  # run NAME SCRIPT ARGS...: one benchmark, its output to the terminal and the log
    local name=$1 start=$SECONDS
    shift
    [[ "$only" == "  " || "$only" == *" $name "* ]] || return 0
    echo "### $name: python benchmarks/$*" | tee -a "$log"
    timeout 240 "$py" "$@" 2>&1 | grep -v -E "Warning|warn\(|^ *warnings\." | tee -a "$log"
    echo "### $name: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a "$log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
run throughput gptscore_throughput.py --docs 2
run prefix prefix_sharing.py
run prefix_fp32 prefix_sharing.py --dtype float32 --repeats 1
run sdpa_agreement sdpa_agreement.py
run exact_vs_sampling geval_exact_vs_sampling.py --items 4
run aspects aspect_sharing.py --methods geval gptscore-source-first
run aspects_grpo_group aspect_sharing.py --methods gptscore-source-first --summaries 4 --repeats 5
run grpo_step grpo_step.py --policy embedded:gemma3-270m --cold --profile 4
run grpo_step_large grpo_step.py --policy embedded:gemma3-270m --batch 32 --num-generations 8 --max-completion-length 64 --cold --profile 4
# the same with PyTorch's own attention kernel choice (cuDNN's, with a plan per new shape)
run grpo_step_large_cudnn grpo_step.py --policy embedded:gemma3-270m --batch 32 --num-generations 8 --max-completion-length 64 --cold --profile 4 --cuda-attention pytorch
