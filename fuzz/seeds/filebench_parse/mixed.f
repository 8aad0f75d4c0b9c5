# Two filesets, a file, two processes, variables, quoted names and most attribute forms.
set $dir=/tmp
set $n=100
set $io=8k
set mode quit alldone
define fileset name=small,path=$dir,size=16k,entries=$n,dirwidth=20,prealloc=50,reuse,
    filesizegamma=1500,dirgamma=0
define file name="one file",path=$dir,size=1m,prealloc
define process name=writer,instances=2
{
  thread name=w,memsize=1m,useism,instances=4
  {
    flowop createfile name=c,filesetname=small,fd=1
    flowop write name=wr,fd=1,iosize=$io,random,dsync,iters=3
    flowop fsync name=s,fd=1
    flowop closefile name=cl,fd=1
    flowop finishoncount name=done,value=1000
  }
}
define process name=reader
{
  thread name=r
  {
    flowop read name=rd,filesetname="one file",iosize=4k,random,workingset=512k
    flowop semblock name=b,value=10,highwater=5
    flowop sempost name=p,value=1,target=b
  }
}
echo "loaded"
psrun -10 30
