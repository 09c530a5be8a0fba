"""`irpipe datasets list | info NAME | fetch NAME... | add NAME DIR`."""
from __future__ import annotations

import argparse
import json


def define_args(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="registered datasets and what each provides (and your own, added by name)")
    info = actions.add_parser("info", help="a dataset's description, counts, files and upstream (JSON)")
    info.add_argument("name", metavar="NAME|DIR")
    fetch = actions.add_parser("fetch", help="resolve a dataset's files into the cache (mirror, then download)")
    fetch.add_argument("names", nargs="+", metavar="NAME")
    add = actions.add_parser("add", help="give a dataset folder of your own (a dataset.yaml, a BEIR folder or the MS "
                                         "MARCO passage files) a name; NAME:SPLIT then picks a split")
    add.add_argument("name", metavar="NAME")
    add.add_argument("folder", metavar="DIR")


def _table(rows: list[tuple[str, str, str]]) -> None:
    widths = [max(len(row[i]) for row in rows + [("NAME", "PROVIDES", "")]) for i in range(2)]
    print(f"{'NAME':<{widths[0]}}  {'PROVIDES':<{widths[1]}}  DESCRIPTION")
    for name, provides, description in rows:
        print(f"{name:<{widths[0]}}  {provides:<{widths[1]}}  {description}")


def main(args: argparse.Namespace) -> int:
    from pipeline.data.registry import add_local, dataset_names, get_dataset, local_datasets

    if args.action == "list":
        datasets = [*map(get_dataset, dataset_names()), *map(get_dataset, local_datasets())]
        _table([(ds.name, ",".join(ds.provides), ds.description) for ds in datasets])
        print("\n(and irds:<id> for any ir_datasets id, and the path of any dataset folder; DIR:SPLIT for a "
              "BEIR or MS MARCO folder's split)")
    elif args.action == "info":
        print(json.dumps(get_dataset(args.name).info(), indent=2, ensure_ascii=False))
    elif args.action == "add":
        dataset = add_local(args.name, args.folder)
        print(f"{dataset.name}\t{','.join(dataset.provides)}\t{local_datasets()[args.name]}")
    else:
        datasets = [get_dataset(name) for name in args.names]  # unknown names fail before any fetching
        for dataset in datasets:
            for key, path in dataset.fetch().items():
                print(f"{dataset.name}\t{key}\t{path}")
    return 0
