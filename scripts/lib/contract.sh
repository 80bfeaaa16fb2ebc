# Generated from trainer/contract.py by `make generate`; do not edit.
# shellcheck shell=bash disable=SC2034
RUN_AS_ID=10000
