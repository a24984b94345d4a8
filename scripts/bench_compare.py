#!/usr/bin/env python3
"""Compares two `bench` text logs row by row (the ratio to the best reference of each
contender row both logs have) and prints a Markdown table, the geometric mean of after/before,
and the preemption latencies. Usage: scripts/bench_compare.py BEFORE.txt AFTER.txt"""
import re,sys,math
pat=re.compile(r'^\s+(\S+)\s+(\S+)\s+c(\d)\s+(\S+)\s+([\d.]+) ms\s+([\d.]+)x')
pp=re.compile(r'^\s+preempt\s+(\S+)\s+urgent kernel waited and ran\s+([\d.]+) ms')
def load(f):
    d={};p={}
    for l in open(f):
        m=pat.match(l)
        if m and not m[4].startswith('ref') and m[4]!='copy': d[(m[1],m[2],m[3],m[4])]=(float(m[5]),float(m[6]))
        m=pp.match(l)
        if m: p[m[1]]=float(m[2])
    return d,p
(b,bp),(a,ap)=load(sys.argv[1]),load(sys.argv[2])
keys=[k for k in a if k in b]
rs=[]
print("| workload | param | cluster | contender | before | after | after/before |\n|---|---|---|---|---|---|---|")
for k in keys:
    rb=b[k][1]; ra=a[k][1]; rs.append(ra/rb)
    print("| %s | %s | %s | %s | %.3fx | %.3fx | %.3f |"%(k+(rb,ra,ra/rb)))
g=math.exp(sum(math.log(r) for r in rs)/len(rs))
print("\n%d contender rows: geomean after/before %.3f, min %.3f, max %.3f"%(len(rs),g,min(rs),max(rs)))
for c in ap:
    if c in bp: print("preempt %-14s before %.3f ms after %.3f ms"%(c,bp[c],ap[c]))
